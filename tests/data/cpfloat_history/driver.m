% Runs the calls of calls.txt through the cpfloat MEX found first on the path.
% Usage: octave-cli --eval "driver('calls.txt', 'inputs.bin', 'outdir')"
% calls.txt: one call a line, "sequence<TAB>input<TAB>options", input one of
% double/single/none, options "none" (cpfloat(x)), "empty" (cpfloat(x, [])) or a
% JSON object (cpfloat(x, struct)).  "clear cpfloat" before each new sequence.
% Writes outdir/log.txt (one line a call: status, identifier, warning, returned
% options) and outdir/outputs.bin (the outputs, as float64, one after another).
function driver(callsfile, inputsfile, outdir)
  fid = fopen(inputsfile, 'r'); X = fread(fid, Inf, 'double')'; fclose(fid);
  calls = fopen(callsfile, 'r');
  logf = fopen(fullfile(outdir, 'log.txt'), 'w');
  outf = fopen(fullfile(outdir, 'outputs.bin'), 'w');
  previous = '';
  while true
    line = fgetl(calls);
    if ~ischar(line), break; end
    parts = strsplit(line, "\t");
    if ~strcmp(parts{1}, previous)
      clear cpfloat; previous = parts{1};
    end
    switch parts{2}
      case 'double', x = X;
      case 'single', x = single(X);
      otherwise, x = [];
    end
    lastwarn('');
    try
      switch parts{3}
        case 'none', [y, o] = cpfloat(x);
        case 'empty', [y, o] = cpfloat(x, []);
        otherwise, [y, o] = cpfloat(x, jsondecode(parts{3}));
      end
      [w, wid] = lastwarn();
      fprintf(logf, 'ok\t%s\t%s\n', wid, options_text(o));
      fflush(logf);
      fwrite(outf, double(y), 'double');
    catch err
      fprintf(logf, 'error\t%s\t%s\n', err.identifier, err.message);
    end
  end
  fclose(calls); fclose(logf); fclose(outf);
end

function text = options_text(o)
  names = fieldnames(o); text = '';
  for k = 1:numel(names)
    v = o.(names{k});
    if ischar(v), s = v; else, s = sprintf('%.17g ', v); s = strtrim(s); end
    text = [text, names{k}, '=', s, ';'];
  end
end
