function s = string(x)
% STRING  MATLAB's string of a char matrix, for Octave 7 (which has no string arrays): one cell per
% row.  The anchor's Kulisch_Accumulation (Generic_BFMA_TC.m, the exact sum of AMD's CDNA1 model,
% MI100) turns its matrix of aligned bit rows into strings and reads them back with braces and
% length, which a column of cells answers the same way.  See ../README.md.
if ~ischar(x)
  error('string: this shim takes char matrices only');
end
s = cellstr(x);
end
