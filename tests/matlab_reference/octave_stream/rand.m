function r = rand(varargin)
%RAND  MATLAB's rand for GNU Octave, from MATLAB's generator (rng.m beside this file).
%   Each double is made from two 32-bit outputs a, b as
%   (floor(a/32) * 2^26 + floor(b/64)) / 2^53 (mt19937ar's genrand_res53), and
%   arrays are filled in column-major order.  Sizes: rand, rand(n),
%   rand(m, n, ...), rand([m n ...]).
if nargin == 0
  dims = [1 1];
elseif nargin == 1 && isscalar(varargin{1})
  dims = [varargin{1} varargin{1}];
elseif nargin == 1
  dims = varargin{1};
else
  dims = [varargin{:}];
end
n = prod(dims);
w = mt_words(2 * n);
a = floor(w(1:2:end) / 32);
b = floor(w(2:2:end) / 64);
r = reshape((a * 67108864 + b) / 9007199254740992, dims);
end
