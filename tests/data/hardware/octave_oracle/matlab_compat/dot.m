function d = dot(a, b)
% DOT  Octave's builtin dot, but 0 (the empty sum) when both arguments are empty, whatever their
% shapes.  The anchor's GlobalAlignmentSum (Generic_BFMA_TC.m) takes dot of a 0x0 and a 1x0 array
% when a block has no nonzero product and the addend is kept apart (late_partial_sum, the AMD
% CDNA3 model); both Octave and MATLAB reject the shapes.  See ../README.md.
if isempty(a) && isempty(b)
  d = 0;
else
  d = builtin('dot', a, b);
end
end
