// Image layers, channels last: ImageRows, Conv2d, Pool2d, Flatten.
#include <baton/core/error.h>
#include <baton/nn/conv.h>

#include <algorithm>
#include <cmath>

namespace baton {
namespace {

std::string size_text(const ImageSize& s) {
  return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}

void check_rows(const char* what, int64_t rows, const ImageSize& in) {
  if (in.pixels() <= 0 || rows % in.pixels() != 0) {
    throw InputError(std::string(what) + ": " + std::to_string(rows) +
                     " rows are not whole images of " + std::to_string(in.h) + "x" +
                     std::to_string(in.w) + " pixels");
  }
}

}  // namespace

// ---- ImageRows ----

ImageRows::ImageRows(ImageSize in) : in_(in) {
  if (in.c <= 0 || in.h <= 0 || in.w <= 0) throw InputError("ImageRows: bad image shape");
}

std::string ImageRows::describe() const { return "Image(" + size_text(in_) + ")"; }

int64_t ImageRows::plan(int64_t max_batch, int64_t in_features) {
  if (in_features != in_.c * in_.pixels()) {
    throw InputError("the image shape " + size_text(in_) + " has " +
                     std::to_string(in_.c * in_.pixels()) + " values, but the data has " +
                     std::to_string(in_features) + " features");
  }
  y_ = buffer({max_batch * in_.pixels(), in_.c});
  return in_.c;
}

const Tensor& ImageRows::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows();
  y_.set_rows(n * in_.pixels());
  be().chw_to_rows(x.data(), y_.data(), n, in_.c, in_.h, in_.w);
  return y_;
}

const Tensor& ImageRows::backward(const Tensor& /*dy*/, bool need_input_grad) {
  if (need_input_grad) {
    throw RuntimeError("ImageRows is a model's first layer: nothing takes its input gradient");
  }
  return dx_;
}

// ---- Conv2d ----

Conv2d::Conv2d(const Options& o) : o_(o) {
  const auto bad = [](const std::string& why) { throw InputError("Conv2d: " + why); };
  if (o.in.c <= 0 || o.in.h <= 0 || o.in.w <= 0 || o.out_channels <= 0)
    bad("sizes must be positive");
  if (o.kernel < 1 || o.stride < 1 || o.padding < 0) {
    bad("kernel and stride must be >= 1, padding >= 0");
  }
  if (o.groups < 1 || o.in.c % o.groups != 0 || o.out_channels % o.groups != 0) {
    bad(std::to_string(o.groups) + " groups do not divide " + std::to_string(o.in.c) +
        " input and " + std::to_string(o.out_channels) + " output channels");
  }
  const ImageSize out_size = out();
  if (out_size.h < 1 || out_size.w < 1) {
    bad("a " + std::to_string(o.kernel) + "x" + std::to_string(o.kernel) + " kernel does not fit " +
        std::to_string(o.in.h) + "x" + std::to_string(o.in.w) + " images with padding " +
        std::to_string(o.padding));
  }
  const int64_t k = o.kernel * o.kernel * (o.in.c / o.groups);
  w_ = Param{"weight", own_buffer({o.out_channels, k}), own_buffer({o.out_channels, k}), true};
  if (o.bias) b_ = Param{"bias", own_buffer({o.out_channels}), own_buffer({o.out_channels}), false};
}

ImageSize Conv2d::out() const {
  ConvShape s = shape(0);
  return {o_.out_channels, s.oh(), s.ow()};
}

ConvShape Conv2d::shape(int64_t rows) const {
  ConvShape s;
  s.n = o_.in.pixels() > 0 ? rows / o_.in.pixels() : 0;
  s.h = o_.in.h;
  s.w = o_.in.w;
  s.c_in = o_.in.c;
  s.c_out = o_.out_channels;
  s.kh = s.kw = o_.kernel;
  s.stride = o_.stride;
  s.pad = o_.padding;
  s.groups = o_.groups;
  s.algorithm = o_.algorithm;
  return s;
}

std::string Conv2d::describe() const {
  std::string s = "Conv2d(" + std::to_string(o_.in.c) + " -> " + std::to_string(o_.out_channels) +
                  ", " + std::to_string(o_.kernel) + "x" + std::to_string(o_.kernel);
  if (o_.stride != 1) s += ", stride " + std::to_string(o_.stride);
  if (o_.groups != 1) s += ", groups " + std::to_string(o_.groups);
  if (o_.act != Activation::kNone) s += std::string(", ") + activation_name(o_.act);
  return s + ")";
}

void Conv2d::kernel_notes(KernelNotes& out) const {
  if (kernel_) out.emplace_back(describe(), kernel_->describe());
}

int64_t Conv2d::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != o_.in.c) {
    throw InputError("Conv2d expects " + std::to_string(o_.in.c) + " channels, got " +
                     std::to_string(in_features));
  }
  check_rows("Conv2d", max_rows, o_.in);
  const ConvShape s = shape(max_rows);
  const int64_t m = s.n * s.oh() * s.ow();
  kernel_ = be().plan_conv(s);
  y_ = buffer({m, o_.out_channels});
  if (has_epilogue()) dpre_ = buffer({m, o_.out_channels});
  if (needs_pre_activation(o_.act)) pre_ = buffer({m, o_.out_channels});
  dx_ = buffer({max_rows, o_.in.c});
  return o_.out_channels;
}

int64_t Conv2d::flops_per_row() const { return 2 * w_.value.dim(1) * o_.out_channels; }

int64_t Conv2d::saved_floats_per_row(int64_t out_width) const {
  const double in_per_out =
      static_cast<double>(o_.in.pixels()) / static_cast<double>(out().pixels());
  return 3 * out_width + static_cast<int64_t>(std::ceil(in_per_out * static_cast<double>(o_.in.c)));
}

int64_t Conv2d::backend_scratch_bytes(int64_t max_rows) const {
  return backend().conv_scratch_bytes(shape(max_rows));
}

void Conv2d::init(Rng& rng) {
  const float fan_in = static_cast<float>(w_.value.dim(1));
  const float fan_out = static_cast<float>(o_.out_channels / o_.groups * o_.kernel * o_.kernel);
  const float bound = o_.act == Activation::kRelu || needs_pre_activation(o_.act)
                          ? std::sqrt(6.0f / fan_in)
                          : std::sqrt(6.0f / (fan_in + fan_out));
  set_values(w_.value, [&](Tensor& h) {
    for (auto& v : h.span()) v = (2.0f * rng.uniform() - 1.0f) * bound;
  });
  if (o_.bias) b_.value.fill(0.0f);
}

const Tensor& Conv2d::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  x_ = &x;
  const ConvShape s = shape(x.rows());
  const int64_t m = s.n * s.oh() * s.ow();
  y_.set_rows(m);
  kernel_->forward(x.data(), w_.value.data(), y_.data(), s.n);
  const float* bias = o_.bias ? b_.value.data() : nullptr;
  if (needs_pre_activation(o_.act)) {
    pre_.set_rows(m);
    be().bias_activation(y_.data(), bias, m, o_.out_channels, Activation::kNone);
    be().copy(y_.data(), pre_.data(), m * o_.out_channels);
    be().activation_forward(pre_.data(), y_.data(), m * o_.out_channels, o_.act);
  } else if (has_epilogue()) {
    be().bias_activation(y_.data(), bias, m, o_.out_channels, o_.act);
  }
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_input_grad) {
  const ConvShape s = shape(x_->rows());
  const int64_t m = s.n * s.oh() * s.ow();
  // A bare convolution (followed by a norm: no bias, no activation) takes
  // dy as it is; otherwise the pre-activation gradient and the bias's.
  const float* g = dy.data();
  if (has_epilogue()) {
    dpre_.set_rows(m);
    if (o_.bias) be().fill(b_.grad.data(), o_.out_channels, 0.0f);
    be().activation_backward_bias(y_.data(), pre_.empty() ? nullptr : pre_.data(), dy.data(),
                                  dpre_.data(), o_.bias ? b_.grad.data() : nullptr, m,
                                  o_.out_channels, o_.act);
    g = dpre_.data();
  }
  kernel_->backward_weights(x_->data(), g, w_.grad.data(), s.n);
  params_final();
  if (!need_input_grad) return dx_;
  dx_.set_rows(x_->rows());
  kernel_->backward_data(g, w_.value.data(), dx_.data(), s.n);
  return dx_;
}

std::vector<Param*> Conv2d::params() {
  if (o_.bias) return {&w_, &b_};
  return {&w_};
}

// ---- Pool2d ----

Pool2d::Pool2d(Kind kind, ImageSize in, int64_t kernel, int64_t stride, int64_t padding)
    : kind_(kind), in_(in), k_(kernel), stride_(stride), pad_(padding) {
  if (in.c <= 0 || in.h <= 0 || in.w <= 0) throw InputError("Pool2d: bad image shape");
  if (kernel == 0) {
    if (kind != Kind::kAvg) throw InputError("Pool2d: global pooling is average pooling");
    return;
  }
  if (kernel < 1 || stride < 1 || padding < 0 || 2 * padding > kernel) {
    throw InputError("Pool2d: kernel and stride must be >= 1, padding at most half the kernel");
  }
  if (out().h < 1 || out().w < 1) {
    throw InputError("Pool2d: a " + std::to_string(kernel) + "x" + std::to_string(kernel) +
                     " window does not fit " + std::to_string(in.h) + "x" + std::to_string(in.w) +
                     " images");
  }
}

ImageSize Pool2d::out() const {
  if (k_ == 0) return {in_.c, 1, 1};
  const PoolShape s = shape(0);
  return {in_.c, s.oh(), s.ow()};
}

PoolShape Pool2d::shape(int64_t rows) const {
  PoolShape s;
  s.n = rows / in_.pixels();
  s.h = in_.h;
  s.w = in_.w;
  s.c = in_.c;
  s.k = k_;
  s.stride = stride_;
  s.pad = pad_;
  return s;
}

std::string Pool2d::describe() const {
  if (k_ == 0) return "GlobalAvgPool";
  return std::string(kind_ == Kind::kMax ? "MaxPool2d(" : "AvgPool2d(") + std::to_string(k_) +
         ", stride " + std::to_string(stride_) + ")";
}

int64_t Pool2d::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != in_.c) {
    throw InputError("Pool2d expects " + std::to_string(in_.c) + " channels, got " +
                     std::to_string(in_features));
  }
  check_rows("Pool2d", max_rows, in_);
  const int64_t out_rows = max_rows / in_.pixels() * out().pixels();
  y_ = buffer({out_rows, in_.c});
  dx_ = buffer({max_rows, in_.c});
  if (kind_ == Kind::kMax) argmax_ = int_buffer({out_rows, in_.c});
  return in_.c;
}

const Tensor& Pool2d::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows() / in_.pixels();
  y_.set_rows(n * out().pixels());
  if (k_ == 0) {
    // The mean over each image's pixels.
    for (int64_t i = 0; i < n; ++i) {
      be().column_sums(x.data() + i * in_.pixels() * in_.c, in_.pixels(), in_.c,
                       y_.data() + i * in_.c);
    }
    be().scale(y_.data(), n * in_.c, 1.0f / static_cast<float>(in_.pixels()));
  } else if (kind_ == Kind::kMax) {
    be().max_pool_forward(x.data(), y_.data(), argmax_.data(), shape(x.rows()));
  } else {
    be().avg_pool_forward(x.data(), y_.data(), shape(x.rows()));
  }
  return y_;
}

const Tensor& Pool2d::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  const int64_t n = dy.rows() / out().pixels();
  dx_.set_rows(n * in_.pixels());
  if (k_ == 0) {
    be().fill(dx_.data(), n * in_.pixels() * in_.c, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      be().add_repeated(dx_.data() + i * in_.pixels() * in_.c, dy.data() + i * in_.c, in_.pixels(),
                        in_.c);
    }
    be().scale(dx_.data(), n * in_.pixels() * in_.c, 1.0f / static_cast<float>(in_.pixels()));
  } else if (kind_ == Kind::kMax) {
    be().max_pool_backward(dy.data(), argmax_.data(), dx_.data(), shape(n * in_.pixels()));
  } else {
    be().avg_pool_backward(dy.data(), dx_.data(), shape(n * in_.pixels()));
  }
  return dx_;
}

// ---- Flatten ----

Flatten::Flatten(ImageSize in) : in_(in) {}

std::string Flatten::describe() const { return "Flatten(" + size_text(in_) + ")"; }

int64_t Flatten::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != in_.c) {
    throw InputError("Flatten expects " + std::to_string(in_.c) + " channels, got " +
                     std::to_string(in_features));
  }
  check_rows("Flatten", max_rows, in_);
  y_ = Tensor();
  dx_ = Tensor();
  return in_.pixels() * in_.c;
}

namespace {

// `view` as a view of `src` in `shape`: made once per source buffer (the
// layers around keep theirs for the whole run), then only its rows change.
void view_of(Tensor& view, const Tensor& src, int64_t rows, int64_t cols) {
  if (view.shares_storage_with(src) && view.cols() == cols) {
    view.set_rows(rows);
  } else {
    view = src.reshaped({rows, cols});
  }
}

}  // namespace

const Tensor& Flatten::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  // (n * h * w, c) and (n, h * w * c) are the same numbers in the same
  // order: a view of the input, no copy.
  view_of(y_, x, x.rows() / in_.pixels(), in_.pixels() * in_.c);
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  view_of(dx_, dy, dy.rows() * in_.pixels(), in_.c);
  return dx_;
}

// ---- ResidualBlock ----

ResidualBlock::ResidualBlock(ImageSize in, int64_t out_channels, int64_t stride,
                             const std::function<std::unique_ptr<Layer>()>& norm,
                             ConvAlgorithm algorithm)
    : in_(in) {
  Conv2d::Options a;
  a.algorithm = algorithm;
  a.in = in;
  a.out_channels = out_channels;
  a.kernel = 3;
  a.stride = stride;
  a.padding = 1;
  a.bias = !norm;  // a norm's shift makes the bias redundant
  auto first = std::make_unique<Conv2d>(a);
  const ImageSize mid = first->out();
  main_.push_back(std::move(first));
  if (norm) main_.push_back(norm());
  main_.push_back(std::make_unique<ActivationLayer>(Activation::kRelu));
  Conv2d::Options b = a;
  b.in = mid;
  b.stride = 1;
  auto second = std::make_unique<Conv2d>(b);
  out_ = second->out();
  main_.push_back(std::move(second));
  if (norm) main_.push_back(norm());
  if (stride != 1 || out_channels != in.c) {
    Conv2d::Options s = a;
    s.kernel = 1;
    s.padding = 0;
    shortcut_.push_back(std::make_unique<Conv2d>(s));
    if (norm) shortcut_.push_back(norm());
  }
}

ResidualBlock::~ResidualBlock() = default;

std::string ResidualBlock::describe() const {
  return "ResidualBlock(" + size_text(in_) + " -> " + size_text(out_) +
         (shortcut_.empty() ? ")" : ", projected)");
}

void ResidualBlock::bind_backend(const Backend& backend) {
  Layer::bind_backend(backend);
  for (auto& l : main_) l->bind_backend(backend);
  for (auto& l : shortcut_) l->bind_backend(backend);
}

void ResidualBlock::attach(CrossReplicaSum* replicas) {
  for (auto& l : main_) l->attach(replicas);
  for (auto& l : shortcut_) l->attach(replicas);
}

bool ResidualBlock::communicates() const {
  for (const auto& l : main_) {
    if (l->communicates()) return true;
  }
  return false;
}

bool ResidualBlock::needs_cross_replica() const {
  for (const auto& l : main_) {
    if (l->needs_cross_replica()) return true;
  }
  return false;
}

int64_t ResidualBlock::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != in_.c) {
    throw InputError("ResidualBlock expects " + std::to_string(in_.c) + " channels, got " +
                     std::to_string(in_features));
  }
  check_rows("ResidualBlock", max_rows, in_);
  const int64_t n = max_rows / in_.pixels();
  fuse_layers(main_);
  fuse_layers(shortcut_);
  size_t k = 0;
  for (auto* group : {&main_, &shortcut_}) {
    int64_t rows = max_rows, width = in_features;
    for (auto& l : *group) {
      l->set_index((index_ + 1) * 1000 + k++);
      width = l->plan(rows, width);
      rows = n * l->output_rows_per_sample(rows / n);
    }
  }
  const int64_t out_rows = max_rows / in_.pixels() * out_.pixels();
  y_ = buffer({out_rows, out_.c});
  dsum_ = buffer({out_rows, out_.c});
  dx_ = buffer({max_rows, in_.c});
  return out_.c;
}

int64_t ResidualBlock::flops_per_row() const {
  int64_t n = 0;
  // Per output row: the first conv's rows are output rows too (its stride
  // made them), and so are the shortcut's.
  for (const auto& l : main_) n += l->flops_per_row();
  for (const auto& l : shortcut_) n += l->flops_per_row();
  return n;
}

int64_t ResidualBlock::saved_floats_per_row(int64_t out_width) const {
  int64_t n = 3 * out_width;
  for (const auto& l : main_) n += l->saved_floats_per_row(out_width);
  for (const auto& l : shortcut_) n += l->saved_floats_per_row(out_width);
  return n;
}

void ResidualBlock::for_each_layer_rows(
    int64_t max_rows, const std::function<void(const Layer&, int64_t)>& fn) const {
  // Each layer at the rows plan() gave it.
  const int64_t n = max_rows / in_.pixels();
  if (n < 1) return;
  for (const auto* group : {&main_, &shortcut_}) {
    int64_t rows = max_rows;
    for (const auto& l : *group) {
      fn(*l, rows);
      rows = n * l->output_rows_per_sample(rows / n);
    }
  }
}

int64_t ResidualBlock::product_scratch_bytes(int64_t max_rows) const {
  int64_t bytes = 0;
  for_each_layer_rows(max_rows, [&](const Layer& l, int64_t rows) {
    bytes = std::max(bytes, l.product_scratch_bytes(rows));
  });
  return bytes;
}

void ResidualBlock::kernel_notes(KernelNotes& out) const {
  for (const auto& l : main_) l->kernel_notes(out);
  for (const auto& l : shortcut_) l->kernel_notes(out);
}

int64_t ResidualBlock::backend_scratch_bytes(int64_t max_rows) const {
  int64_t bytes = 0;
  for_each_layer_rows(max_rows, [&](const Layer& l, int64_t rows) {
    bytes += l.backend_scratch_bytes(rows);
  });
  return bytes;
}

void ResidualBlock::init(Rng& rng) {
  for (auto& l : main_) l->init(rng);
  for (auto& l : shortcut_) l->init(rng);
}

const Tensor& ResidualBlock::forward(const Tensor& x, const ForwardContext& ctx) {
  const Tensor* h = &x;
  // The block's rows are pixels: the dropout-free parts need no row keys,
  // and its norms take the context as it is.
  for (auto& l : main_) h = &l->forward(*h, ctx);
  const Tensor* s = &x;
  for (auto& l : shortcut_) s = &l->forward(*s, ctx);
  const int64_t rows = h->rows();
  y_.set_rows(rows);
  be().add_relu(h->data(), s->data(), y_.data(), rows * out_.c);
  return y_;
}

const Tensor& ResidualBlock::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t rows = dy.rows();
  dsum_.set_rows(rows);
  // ReLU's gradient passes where its input was above 0: where its output is.
  be().activation_backward(y_.data(), y_.data(), dy.data(), dsum_.data(), rows * out_.c,
                           Activation::kRelu);
  const Tensor* g = &dsum_;
  for (size_t i = main_.size(); i-- > 0;) g = &main_[i]->backward(*g, true);
  const Tensor* gs = &dsum_;
  for (size_t i = shortcut_.size(); i-- > 0;) gs = &shortcut_[i]->backward(*gs, true);
  if (!need_input_grad) return dx_;
  const int64_t in_rows = rows / out_.pixels() * in_.pixels();
  dx_.set_rows(in_rows);
  be().add(g->data(), gs->data(), dx_.data(), in_rows * in_.c);
  return dx_;
}

std::vector<Param*> ResidualBlock::params() {
  std::vector<Param*> out;
  for (auto& l : main_) {
    for (Param* p : l->params()) out.push_back(p);
  }
  for (auto& l : shortcut_) {
    for (Param* p : l->params()) out.push_back(p);
  }
  return out;
}

std::vector<std::pair<std::string, Tensor*>> ResidualBlock::buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  size_t k = 0;
  for (auto* group : {&main_, &shortcut_}) {
    for (auto& l : *group) {
      for (auto& [name, t] : l->buffers())
        out.emplace_back("part" + std::to_string(k) + "." + name, t);
      ++k;
    }
  }
  return out;
}

}  // namespace baton
