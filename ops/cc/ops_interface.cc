// The TensorFlow interface of the ops: names, inputs, attributes and shape functions (no computation here).
//
// Every op takes the multiplier by name (attribute, chosen at run time: no recompiling to switch) and a uint8
// `table` input that is empty except for the table multiplier. `exact_gradients` is read by the Python gradient
// functions only.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace amdnn {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// Output spatial size of a conv (TF's rules); unknown when the input size is unknown.
Status spatial_output(InferenceContext* c, DimensionHandle in, int64_t filter, int64_t stride, int64_t dilation,
                      const std::string& padding, DimensionHandle* out) {
  if (!c->ValueKnown(in)) {
    *out = c->UnknownDim();
    return Status();
  }
  const int64_t size = c->Value(in), effective = (filter - 1) * dilation + 1;
  if (padding == "SAME") {
    *out = c->MakeDim((size + stride - 1) / stride);
  } else {
    if (size < effective)
      return ::tensorflow::errors::InvalidArgument("VALID padding: input size ", size,
                                                   " is smaller than the dilated filter size ", effective);
    *out = c->MakeDim((size - effective) / stride + 1);
  }
  return Status();
}

Status conv2d_shape(InferenceContext* c) {
  ShapeHandle x, w;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &x));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &w));
  std::vector<int32_t> strides, dilations;
  std::string padding;
  TF_RETURN_IF_ERROR(c->GetAttr("strides", &strides));
  TF_RETURN_IF_ERROR(c->GetAttr("dilations", &dilations));
  TF_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  DimensionHandle unused;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(x, 3), c->Dim(w, 2), &unused));
  DimensionHandle out_h = c->UnknownDim(), out_w = c->UnknownDim();
  if (c->ValueKnown(c->Dim(w, 0)) && c->ValueKnown(c->Dim(w, 1)) && strides.size() == 2 && dilations.size() == 2) {
    TF_RETURN_IF_ERROR(spatial_output(c, c->Dim(x, 1), c->Value(c->Dim(w, 0)), strides[0], dilations[0], padding, &out_h));
    TF_RETURN_IF_ERROR(spatial_output(c, c->Dim(x, 2), c->Value(c->Dim(w, 1)), strides[1], dilations[1], padding, &out_w));
  }
  c->set_output(0, c->MakeShape({c->Dim(x, 0), out_h, out_w, c->Dim(w, 3)}));
  return Status();
}

Status shape_from_input(InferenceContext* c, int index) {
  ShapeHandle shape;
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(index, &shape));
  TF_RETURN_IF_ERROR(c->WithRank(shape, 4, &shape));
  c->set_output(0, shape);
  return Status();
}

}  // namespace

#define AMDNN_CONV_ATTRS                          \
  Attr("multiplier: string")                      \
      .Attr("strides: list(int) = [1, 1]")        \
      .Attr("dilations: list(int) = [1, 1]")      \
      .Attr("padding: {'SAME', 'VALID'}")         \
      .Attr("exact_gradients: bool = false")

REGISTER_OP("AmdnnConv2D")
    .Input("input: float")
    .Input("filter: float")
    .Input("table: uint8")
    .Output("output: float")
    .AMDNN_CONV_ATTRS
    .SetShapeFn(conv2d_shape)
    .Doc("NHWC conv2d with an HWIO filter, every product through the multiplier, fp32 accumulation.");

REGISTER_OP("AmdnnConv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: float")
    .Input("out_backprop: float")
    .Input("table: uint8")
    .Output("output: float")
    .AMDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) { return shape_from_input(c, 0); })
    .Doc("Gradient of AmdnnConv2D with respect to its input: out_backprop (*) filter^T, col2im.");

REGISTER_OP("AmdnnConv2DBackpropFilter")
    .Input("input: float")
    .Input("filter_sizes: int32")
    .Input("out_backprop: float")
    .Input("table: uint8")
    .Output("output: float")
    .AMDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) { return shape_from_input(c, 1); })
    .Doc("Gradient of AmdnnConv2D with respect to its filter: im2col(input)^T (*) out_backprop.");

REGISTER_OP("AmdnnMatMul")
    .Input("a: float")
    .Input("b: float")
    .Input("table: uint8")
    .Output("product: float")
    .Attr("multiplier: string")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("exact_gradients: bool = false")
    .SetShapeFn(::tensorflow::shape_inference::MatMulShape)
    .Doc("2-D matrix product, every product through the multiplier (a is the left operand), fp32 accumulation.");

REGISTER_OP("AmdnnIntConv2D")
    .Input("input: uint8")
    .Input("filter: uint8")
    .Input("table: int32")
    .Input("zero_a: int32")
    .Input("zero_w: int32")
    .Input("rescale: float")
    .Output("output: float")
    .Attr("signed_codes: bool = true")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("dilations: list(int) = [1, 1]")
    .Attr("padding: {'SAME', 'VALID'}")
    .SetShapeFn(conv2d_shape)
    .Doc("The integer modes' forward: NHWC codes conv HWIO codes, every product an entry of the 256 x 256 table, "
         "exact integer sums with the zero-point terms, rescaled per output channel (integer_conv.h).");

REGISTER_OP("AmdnnQuantise")
    .Input("input: float")
    .Input("scale: float")
    .Input("zero: float")
    .Output("codes: uint8")
    .Output("in_range: bool")
    .Attr("qmin: int")
    .Attr("qmax: int")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      return Status();
    })
    .Doc("The integer modes' quantiser: each value's 8-bit code clamp(rint(input / scale) + zero, qmin, qmax) as a "
         "byte (zero for a NaN or an infinity) and whether the clamp did not act (integer_quantise.h); scale and zero "
         "hold one value, or one per index of the input's last axis.");

REGISTER_OP("AmdnnFiniteRange")
    .Input("input: float")
    .Output("lo: float")
    .Output("hi: float")
    .Output("finite: bool")
    .Attr("per_channel: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      bool per_channel = false;
      TF_RETURN_IF_ERROR(c->GetAttr("per_channel", &per_channel));
      ShapeHandle bounds = c->Vector(1);
      if (per_channel) {
        ShapeHandle input;
        TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
        bounds = c->Vector(c->Dim(input, -1));
      }
      for (int i = 0; i < 3; ++i) c->set_output(i, bounds);
      return Status();
    })
    .Doc("The integer modes' ranges in one pass: lo = min(0, smallest finite value), hi = max(0, largest finite "
         "value), subnormals counted as zero, and whether every value is finite (integer_quantise.h); of the whole "
         "input ([1] each), or per_channel, one per index of its last axis.");

REGISTER_OP("AmdnnPathCounts")
    .Output("counts: int64")
    .SetIsStateful()  // a fresh reading at every run: never folded or cached
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(4));
      return Status();
    })
    .Doc("Process-wide counts of the CPU GEMM's paths since the library was loaded: [fast calls, generic calls, "
         "fast products, generic products].");

REGISTER_OP("AmdnnCpuKernels")
    .Output("level: string")
    .Output("fast_modes: string")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Vector(c->UnknownDim()));
      return Status();
    })
    .Doc("The instruction-set level the CPU kernels were compiled for, and the modes with a fast kernel there (the "
         "others always take the generic kernel).");

}  // namespace amdnn
