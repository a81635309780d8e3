// Figures a language model's loss is read in, shared by the CLI and the
// studio: the loss is the mean cross-entropy per token in nats; with the
// byte-level tokens of the text dataset a token is a byte, so bits per
// byte is the loss in bits; perplexity is e^loss.
#pragma once

#include <cmath>

namespace baton {

inline double bits_per_byte(double nats_per_byte) { return nats_per_byte / std::log(2.0); }
inline double perplexity(double nats_per_token) { return std::exp(nats_per_token); }

}  // namespace baton
