// Expected failures as values: a Result<T> is either a T or an Error whose message
// already names the input and what is wrong ("train.log: line 3: ..."). Asserts are for bugs only.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace oomdoc {

struct Error {
  std::string message;
  // The input was read but names something oomdoc does not know (a model found nowhere, an
  // architecture it does not model), rather than being malformed: only then may a caller offer
  // another way in (estimate's --params). A broken file's fix is the file.
  bool unknown_kind = false;
};

template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}     // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// For operations that produce nothing but can fail.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace oomdoc
