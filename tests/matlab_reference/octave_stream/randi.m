function r = randi(imax, varargin)
%RANDI  MATLAB's randi for GNU Octave: one rand number u per integer, 1 + floor(imax * u)
%   (imin + floor((imax - imin + 1) * u) for randi([imin imax], ...)).  Sizes as for rand.
if numel(imax) == 2
  lo = imax(1); hi = imax(2);
else
  lo = 1; hi = imax;
end
u = rand(varargin{:});
r = lo + floor((hi - lo + 1) * u);
end
