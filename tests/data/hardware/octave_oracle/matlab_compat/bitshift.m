function y = bitshift(a, k)
% BITSHIFT  Octave's builtin bitshift, but empty for empty arguments, as MATLAB's is.
%
% Octave 7 raises "K must be a scalar or array of integers" for bitshift(uint32([]), int16([]));
% MATLAB returns an empty array.  The anchor's AlignSignficand (Generic_BFMA_TC.m) makes that call
% when a block has no nonzero product and the addend is kept apart (late_partial_sum, the AMD
% CDNA3 model).  Put this folder on the path only for the AMD run (see ../README.md).
if isempty(a) || isempty(k)
  y = a([]);
else
  y = builtin('bitshift', a, k);
end
end
