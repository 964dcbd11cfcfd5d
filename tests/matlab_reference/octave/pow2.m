function y = pow2(x, e)
%POW2  MATLAB's pow2 for GNU Octave: Y = POW2(X, E) is X .* 2.^E scaled exactly.
%   MATLAB's pow2(X, E) scales like C's ldexp: one rounding, and only where the
%   result is subnormal.  Octave's forms 2.^E first, which overflows for
%   E > 1023 and underflows for E < -1074 although X .* 2^E is representable;
%   chop.m calls pow2(x, t-1-e) with such E for the extreme inputs.  This file
%   is put first on the path by run_reference.m under Octave only.
if nargin == 1
  y = 2 .^ x;
  return
end
if isa(x, 'single')
  emin = -125; safe = -100;     % f .* 2^k is normal for k >= emin (0.5 <= |f| < 1)
else
  emin = -1021; safe = -1000;
end
[f, ex] = log2(x);              % x = f .* 2.^ex with 0.5 <= |f| < 1 (x = f for 0, Inf, NaN)
k = double(ex) + double(e);
if isscalar(k) && ~isscalar(x), k = k * ones(size(x)); end
if isscalar(f) && ~isscalar(k), f = f * ones(size(k)); x = x * ones(size(k)); end
y = f;
big = k >= emin;                % normal or overflowing result: 2*f is exact, then one product
y(big) = (2 * f(big)) .* 2 .^ (k(big) - 1);
small = ~big;                   % subnormal or zero result: f*2^safe is exact, then one rounding
y(small) = (f(small) .* 2 ^ safe) .* 2 .^ (k(small) - safe);
special = x == 0 | ~isfinite(x);
y(special) = x(special);
end
