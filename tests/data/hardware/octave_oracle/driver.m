function driver(directory)
% DRIVER  Run the anchor's tensor-core models (MATLAB-tensor-core, models/*.m, unchanged) on the
% inputs that make_oracle.py wrote, for tests/data/hardware/octave_oracle.npz.
%
%   driver(DIR) reads DIR/calls.txt, one product per line:
%       <model function> <input format> <output format> M K N
%   and DIR/inputs.bin, for each line A (M x K), B (K x N), C (M x N) as column-major doubles;
%   it calls  D = <model>(1, A, B, 1, C, informat, outformat)  (V100TC takes no input format,
%   AMD's MI*MC no output format)
%   and appends D (M x N, column-major doubles) to DIR/outputs.bin.  A call that fails writes
%   NaN with the payload bits 0x7ff8dead00000000 instead and logs the error in DIR/errors.txt.
%
% The models print a line per block (an assignment without a semicolon in Generic_BFMA_TC.m):
% run with stdout sent to a file.
calls = textscan(fopen(fullfile(directory, 'calls.txt'), 'r'), '%s %s %s %d %d %d');
inputs = fopen(fullfile(directory, 'inputs.bin'), 'r');
outputs = fopen(fullfile(directory, 'outputs.bin'), 'w');
errors = fopen(fullfile(directory, 'errors.txt'), 'w');
failed = typecast(uint64(hex2dec('7ff8dead00000000')), 'double');
for call = 1:numel(calls{1})
  M = double(calls{4}(call)); K = double(calls{5}(call)); N = double(calls{6}(call));
  A = reshape(fread(inputs, M * K, 'double'), M, K);
  B = reshape(fread(inputs, K * N, 'double'), K, N);
  C = reshape(fread(inputs, M * N, 'double'), M, N);
  name = calls{1}{call}; informat = calls{2}{call}; outformat = calls{3}{call};
  % CPFloat's MEX keeps the options of its last call, saturation included, which GEMM.m sets for
  % the MI300X's FNUZ formats only: unloading it makes every call start from its defaults.
  clear cpfloat
  try
    if strcmp(name, 'V100TC')
      D = V100TC(1, A, B, 1, C, outformat);
    elseif strncmp(name, 'MI', 2)  % AMD's models: fp32 output, no output format argument
      D = feval(name, 1, A, B, 1, C, informat);
    else
      D = feval(name, 1, A, B, 1, C, informat, outformat);
    end
  catch err
    fprintf(errors, '%d %s %s %s: %s\n', call, name, informat, outformat, err.message);
    D = repmat(failed, M, N);
  end
  fwrite(outputs, D, 'double');
end
fclose(inputs); fclose(outputs); fclose(errors);
end
