% Stochastic rounding to bfloat16 and bit flips, reproducible with rng.
% The Python port is stochastic_rounding_rng.py: it prints the same numbers.
rng(2026)
x = rand(3, 4) / 3;
clear chop
c = chop(x, struct('format', 'b', 'round', 5));
fprintf('%.10f %.10f %.10f %.10f\n', c.')
options.format = 'h'; options.flip = 1; options.p = 0.25;
d = chop(pi * ones(2, 3), options);
fprintf('%.10f %.10f %.10f\n', d.')
fprintf('next rand: %.15f\n', rand)
