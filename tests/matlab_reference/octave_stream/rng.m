function s = rng(seed)
%RNG  MATLAB's rng(seed) for GNU Octave (run_reference.m's matlab_stream group).
%   RNG(SEED) seeds the Mersenne Twister mt19937ar with init_genrand(SEED), as
%   MATLAB's default generator does; SEED 0 and 'default' use the reference
%   seed 5489.  S = RNG returns a struct whose State holds the 624 words and
%   the position.  rand.m and randi.m beside this file draw from it.
global RUN_REFERENCE_MT
if nargin >= 1
  if ischar(seed) && strcmp(seed, 'default'), seed = 0; end
  word = seed;
  if word == 0, word = 5489; end
  mt = zeros(624, 1);
  mt(1) = word;
  for i = 2:624
    prev = mt(i - 1);
    mt(i) = mod(mul32(1812433253, bitxor(prev, bitshift(prev, -30))) + (i - 1), 2^32);
  end
  RUN_REFERENCE_MT = struct('mt', mt, 'mti', 624, 'seed', seed);
elseif isempty(RUN_REFERENCE_MT)
  rng(0);
end
s = struct('Type', 'twister', 'Seed', RUN_REFERENCE_MT.seed, ...
           'State', [RUN_REFERENCE_MT.mt; RUN_REFERENCE_MT.mti]);
end


function p = mul32(a, b)
% (a * b) mod 2^32 exactly in doubles (b split into 16-bit halves).
hi = floor(b / 65536);
lo = b - hi * 65536;
p = mod(a * lo + mod(a * hi, 65536) * 65536, 2^32);
end
