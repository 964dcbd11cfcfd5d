// fma.cc: MATLAB's fma(X, Y, Z) for GNU Octave 7, which has none: X .* Y + Z with one rounding,
// element by element through std::fma (double) or std::fmaf (single).  As in MATLAB, the result is
// single when any argument is single (a double argument is then converted to single first; the
// anchor passes only doubles that hold binary32 values there); scalars expand, other arguments
// must have one size.  Used by the anchor's CDNA2 model (Generic_BFMA_TC.m, pws_fma: MI210, MI250).
// Build: mkoctfile fma.cc (or g++ -shared -fPIC against Octave's headers, see ../README.md).
#include <cmath>

#include <octave/oct.h>

template <typename Array>
static Array fused (const Array& x, const Array& y, const Array& z)
{
  const Array* shaped = &x;
  if (y.numel () != 1) shaped = &y;
  if (z.numel () != 1) shaped = &z;
  const dim_vector dims = shaped->dims ();
  for (const Array* a : {&x, &y, &z})
    if (a->numel () != 1 && a->dims () != dims)
      error ("fma: X, Y and Z must have one size or be scalars");
  Array result (dims);
  for (octave_idx_type i = 0; i < result.numel (); i++)
    result(i) = std::fma (x(x.numel () == 1 ? 0 : i), y(y.numel () == 1 ? 0 : i), z(z.numel () == 1 ? 0 : i));
  return result;
}

DEFUN_DLD (fma, args, , "D = fma (X, Y, Z): X .* Y + Z rounded once (MATLAB's fma).")
{
  if (args.length () != 3)
    print_usage ();
  for (int k = 0; k < 3; k++)
    if (! args(k).isfloat () || args(k).iscomplex ())
      error ("fma: X, Y and Z must be real single or double arrays");
  if (args(0).is_single_type () || args(1).is_single_type () || args(2).is_single_type ())
    return ovl (fused (args(0).float_array_value (), args(1).float_array_value (), args(2).float_array_value ()));
  return ovl (fused (args(0).array_value (), args(1).array_value (), args(2).array_value ()));
}
