#pragma once
// kiln tensors in MPI's collectives and messages: an optional component, for programs that
// link MPI (CMake: kiln::mpi, built where find_package(MPI) finds it; nothing else in kiln
// needs MPI). Every call takes an expression or a tensor — an expression is evaluated first,
// where its leaves live — and works on any layout and device:
// - a view that is not contiguous is packed into a contiguous copy and, for results written
//   in place, unpacked into it again;
// - a device tensor is staged through host memory (read once, written back once);
// - the dtype is MPI's own type (bool: C bool; f16/bf16 travel as their 16 bits, reduced by
//   kiln's own MPI operation in float, rounded once per step);
// - floating max/min propagate NaN, as kiln::max and kiln::min do (MPI's built-in MAX/MIN
//   leave a NaN to the order of the operands);
// - counts past MPI's int are sent in pieces (a tensor of 2^31 elements and more);
// - before moving data, every collective checks across the ranks that each rank's tensor has
//   the same dtype and the shape it must have, so a mismatch is a kiln::error on every rank,
//   not a hang or a buffer read past its end;
// - MPI's failures are kiln::errors with MPI's error string: the communicator returns errors
//   (MPI_ERRORS_RETURN) for the call's duration, and its own handler is restored after.
// Collectives must be called by every rank of the communicator, in the same order (MPI's
// rule); an error found inside a call on one rank (an empty tensor, an evaluation or a
// buffer that fails) is reported on all of them. An expression kiln rejects where it is
// written (shapes that do not broadcast) throws before the call is made, on that rank only.
#include "kiln/kiln.hpp"

// MPI's deprecated C++ bindings are not used (and do not compile warning-free).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::mpi {

enum class reduction { sum, max, min };

inline const char* name(reduction r) {
  return r == reduction::sum ? "sum" : r == reduction::max ? "max" : "min";
}

// MPI_Init_thread / MPI_Finalize for a program's main, unless MPI is already initialized.
class environment {
public:
  environment(int& argc, char**& argv) {
    int done = 0;
    MPI_Initialized(&done);
    if (done) return;
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw error("mpi", "MPI_Init_thread failed", "");
    owner_ = true;
  }
  ~environment() {
    if (owner_) MPI_Finalize();
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;

private:
  bool owner_ = false;
};

inline int rank(MPI_Comm comm = MPI_COMM_WORLD) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
inline int size(MPI_Comm comm = MPI_COMM_WORLD) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  return n;
}

namespace detail {

// The most elements one MPI call moves: counts are int. Tests lower it to exercise the
// pieces without 2^31-element tensors.
inline std::int64_t max_count = INT_MAX;

[[noreturn]] inline void fail(const char* op, int rc, const std::string& what) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw error(op, "MPI failed", what + ": " + std::string(msg, static_cast<std::size_t>(len)));
}
inline void check(const char* op, int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail(op, rc, what);
}

// MPI_ERRORS_RETURN on a communicator for one call; checks that MPI is running.
class returning_errors {
public:
  returning_errors(const char* op, MPI_Comm comm) : comm_(comm) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
      throw error(op, "MPI is not running",
                  fin ? "MPI_Finalize was called" : "call MPI_Init (or kiln::mpi::environment)");
    if (comm == MPI_COMM_NULL) throw error(op, "the communicator is MPI_COMM_NULL", "");
    MPI_Comm_get_errhandler(comm_, &old_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~returning_errors() {
    MPI_Comm_set_errhandler(comm_, old_);
    MPI_Errhandler_free(&old_);
  }
  returning_errors(const returning_errors&) = delete;
  returning_errors& operator=(const returning_errors&) = delete;

private:
  MPI_Comm comm_;
  MPI_Errhandler old_ = MPI_ERRHANDLER_NULL;
};

template <class T>
MPI_Datatype type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return MPI_C_BOOL;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else
    return MPI_UINT16_T; // half, bfloat16: their bits
}

// kiln's reductions as MPI operations where MPI's own do not fit: 16-bit floats (in float,
// rounded once per step) and NaN-propagating max/min.
template <class T, reduction R>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  using W = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const W x = static_cast<W>(a[i]), y = static_cast<W>(b[i]);
    if constexpr (R == reduction::sum)
      b[i] = T(x + y);
    else if (std::isnan(x) || (!std::isnan(y) && (R == reduction::max ? x > y : x < y)))
      b[i] = a[i];
  }
}
// Made once per process (MPI_OP_NULL if MPI_Op_create failed), never freed: MPI_Finalize
// frees what is left.
template <class T, reduction R>
MPI_Op own_op() {
  static const MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    if (MPI_Op_create(&combine<T, R>, 1, &o) != MPI_SUCCESS) o = MPI_OP_NULL;
    return o;
  }();
  return op;
}

// The MPI operation of `r` on T; MPI_OP_NULL where there is none (a sum of bools, or an own
// operation MPI could not create): the caller reports that before the ranks meet.
template <class T>
MPI_Op op_of(reduction r) {
  if constexpr (std::is_same_v<T, bool>) {
    if (r == reduction::sum) return MPI_OP_NULL;
    return r == reduction::max ? MPI_LOR : MPI_LAND;
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    if (r == reduction::sum) return own_op<T, reduction::sum>();
    return r == reduction::max ? own_op<T, reduction::max>() : own_op<T, reduction::min>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (r == reduction::sum) return MPI_SUM;
    return r == reduction::max ? own_op<T, reduction::max>() : own_op<T, reduction::min>();
  } else {
    return r == reduction::sum ? MPI_SUM : r == reduction::max ? MPI_MAX : MPI_MIN;
  }
}

// What every rank says of its tensor before a collective: a problem of its own (0: none),
// its dtype, rank and dims. `agree` compares them across the ranks in one allreduce.
struct signature {
  static constexpr int dims = max_rank;
  std::array<std::int64_t, 3 + dims> v{};
  signature(std::int64_t problem, dtype t, const shape& s) {
    v[0] = problem;
    v[1] = static_cast<std::int64_t>(t);
    v[2] = s.size();
    for (int d = 0; d < s.size(); ++d)
      v[static_cast<std::size_t>(3 + d)] = s[d];
  }
};

// Requires the same signature on every rank, leading dims aside when `skip_dim0` (gathers);
// `mine` is this rank's problem, said on this rank (others say another rank has one).
inline void agree(const char* op, MPI_Comm comm, signature s, bool skip_dim0,
                  const std::string& mine) {
  std::string here = "[";
  for (std::int64_t d = 0; d < s.v[2]; ++d)
    here += (d ? ", " : "") + std::to_string(s.v[static_cast<std::size_t>(3 + d)]);
  here += "]";
  if (skip_dim0) s.v[3] = 0;
  std::array<std::int64_t, 2 * std::tuple_size_v<decltype(s.v)>> both{};
  for (std::size_t i = 0; i < s.v.size(); ++i) {
    both[i] = s.v[i];
    both[s.v.size() + i] = -s.v[i];
  }
  check(op,
        MPI_Allreduce(MPI_IN_PLACE, both.data(), static_cast<int>(both.size()), MPI_INT64_T,
                      MPI_MAX, comm),
        "the ranks' agreement on dtypes and shapes");
  if (both[0] != 0) {
    if (!mine.empty()) throw error(op, mine, "on rank " + std::to_string(rank(comm)));
    throw error(op, "another rank could not take part", "its tensor is empty or invalid");
  }
  for (std::size_t i = 1; i < s.v.size(); ++i)
    if (both[i] != -both[s.v.size() + i])
      throw error(op, i == 1 ? "the ranks' dtypes differ" : "the ranks' shapes differ",
                  "rank " + std::to_string(rank(comm)) + " has " +
                      std::string(kiln::name(static_cast<dtype>(s.v[1]))) + " " + here +
                      (skip_dim0 ? " (all dims but the first must agree)" : ""));
}

// MPI's type of a dtype known only at run time (a received message's).
inline MPI_Datatype type_of(dtype d) {
  switch (d) {
  case dtype::b8:
    return type_of<bool>();
  case dtype::u8:
    return type_of<std::uint8_t>();
  case dtype::i32:
    return type_of<std::int32_t>();
  case dtype::u32:
    return type_of<std::uint32_t>();
  case dtype::i64:
    return type_of<std::int64_t>();
  case dtype::f32:
    return type_of<float>();
  case dtype::f64:
    return type_of<double>();
  default:
    return type_of<half>(); // f16, bf16: their bits
  }
}

// A host, contiguous copy of `t`'s values (t itself where it already is one).
template <class T>
tensor<T> packed(const tensor<T>& t) {
  return t.device().is_host() ? t.contiguous() : t.to(kiln::device{});
}
// Writes `values` (host, contiguous, same shape) into `t`, on its device, in its layout.
template <class T>
void unpack(const tensor<T>& t, const tensor<T>& values) {
  if (values.storage() == t.storage() && values.layout() == t.layout()) return;
  const tensor<T> there = values.to(t.device());
  kiln::detail::assign(t, there);
}

// Runs f(offset, count) over [0, n) in pieces of at most max_count elements.
template <class F>
void in_pieces(std::int64_t n, F&& f) {
  for (std::int64_t at = 0; at < n; at += max_count)
    f(at, static_cast<int>(std::min(max_count, n - at)));
}

// The header of a message or broadcast: a problem, dtype, rank and dims.
using header = std::array<std::int64_t, 3 + signature::dims>;
inline shape shape_of_header(const header& h) {
  shape s;
  for (std::int64_t d = 0; d < h[2] && d < max_rank; ++d)
    s.push_back(h[static_cast<std::size_t>(3 + d)]);
  return s;
}
template <class T>
std::string problem_of(const tensor<T>& t) {
  if (!t.storage()) return "the tensor is empty (no storage)";
  return {};
}

} // namespace detail

namespace detail {

template <class E>
inline constexpr bool is_tensor = std::is_same_v<std::remove_cvref_t<E>, tensor<value_t<E>>>;

// What f throws, as a reason (empty when it returns): a rank that cannot go on must still
// meet the others in the next collective, to tell them.
template <class F>
std::string attempt(F&& f) {
  try {
    f();
    return {};
  } catch (const error& x) {
    return x.what();
  } catch (const std::bad_alloc&) {
    return "out of host memory";
  }
}

// `e` evaluated and packed into a host, contiguous tensor (with `own`, never the caller's
// storage), or an empty tensor and the reason in `problem`.
template <class E>
tensor<value_t<E>> prepared(const E& e, std::string& problem, bool own = false) {
  tensor<value_t<E>> out;
  problem = attempt([&] {
    const tensor<value_t<E>> t(e);
    if (const std::string p = problem_of(t); !p.empty()) throw error("mpi", p, "");
    const tensor<value_t<E>> p = packed(t);
    out = own && p.storage() == t.storage() ? t.clone() : p;
  });
  return out; // empty with a problem
}

// After the ranks agreed, each says whether it could make its buffers (`why` empty): all
// fail together otherwise, before any data moves.
inline void ready(const char* op, MPI_Comm comm, const std::string& why) {
  int ok = why.empty() ? 1 : 0;
  check(op, MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (!ok)
    throw error(op, why.empty() ? "another rank could not make its buffers" : why,
                "on rank " + std::to_string(rank(comm)));
}

// Sends (receives) n elements at `p` in pieces of at most max_count.
template <class T>
void send_pieces(const char* op, const T* p, std::int64_t n, int dest, int tag, MPI_Comm comm) {
  in_pieces(n, [&](std::int64_t at, int k) {
    check(op, MPI_Send(p + at, k, type_of<T>(), dest, tag, comm), "MPI_Send");
  });
}
template <class T>
void recv_pieces(const char* op, T* p, std::int64_t n, int source, int tag, MPI_Comm comm) {
  in_pieces(n, [&](std::int64_t at, int k) {
    check(op, MPI_Recv(p + at, k, type_of<T>(), source, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
  });
}

// The tag the pieces of a gather or scatter travel with (collectives and point-to-point
// messages do not match each other, but a user's messages on the same tag would).
inline constexpr int pieces_tag = 32000;

// Root's header (its problem, dtype and shape) to every rank, and every rank's dtype T
// required to be root's, before any data moves: an error on every rank otherwise.
template <class T>
void share_header(const char* op, int root, MPI_Comm comm, header& h,
                  const std::string& root_problem) {
  const bool is_root = rank(comm) == root;
  check(op, MPI_Bcast(h.data(), static_cast<int>(h.size()), MPI_INT64_T, root, comm),
        "MPI_Bcast of the dtype and shape");
  if (h[0] != 0)
    throw error(op, is_root ? root_problem : "the root could not take part",
                "on the root, rank " + std::to_string(root));
  const bool same = h[1] == static_cast<std::int64_t>(dtype_of<T>());
  int all_same = same ? 1 : 0;
  check(op, MPI_Allreduce(MPI_IN_PLACE, &all_same, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (!all_same)
    throw error(op, "the ranks' dtypes differ",
                same ? "another rank's differs from the root's"
                     : std::string(kiln::name(dtype_of<T>())) + " here, " +
                           std::string(kiln::name(static_cast<dtype>(h[1]))) + " on the root");
}

// Elements per index of the first dim of shape s.
inline std::int64_t row_size(const shape& s) {
  std::int64_t n = 1;
  for (int d = 1; d < s.size(); ++d)
    n *= s[d];
  return n;
}

// Moves rank k's counts[k] elements between its `part` and root's `all` (the ranks' parts in
// rank order): to root (gather) or from it (scatter). One MPI_Gatherv/Scatterv where the
// total fits MPI's int, else each part in pieces, point to point.
template <class T>
void exchange_with_root(const char* op, bool to_root, T* all, T* part,
                        const std::vector<std::int64_t>& counts, int root, MPI_Comm comm) {
  const int me = rank(comm);
  std::int64_t total = 0;
  for (auto c : counts)
    total += c;
  if (total <= max_count) {
    std::vector<int> n(counts.size()), at(counts.size());
    for (std::size_t k = 0, a = 0; k < counts.size(); a += n[k], ++k) {
      n[k] = static_cast<int>(counts[k]);
      at[k] = static_cast<int>(a);
    }
    const int mine = n[static_cast<std::size_t>(me)];
    if (to_root)
      check(
          op,
          MPI_Gatherv(part, mine, type_of<T>(), all, n.data(), at.data(), type_of<T>(), root, comm),
          "MPI_Gatherv");
    else
      check(op,
            MPI_Scatterv(all, n.data(), at.data(), type_of<T>(), part, mine, type_of<T>(), root,
                         comm),
            "MPI_Scatterv");
  } else if (me == root) {
    std::int64_t at = 0;
    for (std::size_t k = 0; k < counts.size(); at += counts[k], ++k) {
      const int other = static_cast<int>(k);
      if (other == me)
        std::memcpy(to_root ? all + at : part, to_root ? part : all + at,
                    static_cast<std::size_t>(counts[k]) * sizeof(T));
      else if (to_root)
        recv_pieces(op, all + at, counts[k], other, pieces_tag, comm);
      else
        send_pieces(op, all + at, counts[k], other, pieces_tag, comm);
    }
  } else if (to_root) {
    send_pieces(op, part, counts[static_cast<std::size_t>(me)], root, pieces_tag, comm);
  } else {
    recv_pieces(op, part, counts[static_cast<std::size_t>(me)], root, pieces_tag, comm);
  }
}

inline void check_root(const char* op, int root, MPI_Comm comm) {
  if (root < 0 || root >= size(comm))
    throw error(op, "no such root",
                "rank " + std::to_string(root) + " of " + std::to_string(size(comm)) + " ranks");
}

} // namespace detail

namespace detail {
// The allreduce of `buf` (host, contiguous; empty where this rank has `problem`), of shape s.
template <class T>
void allreduce_packed(const char* op, const tensor<T>& buf, std::string problem, const shape& s,
                      reduction r, MPI_Comm comm) {
  const MPI_Op mop = op_of<T>(r);
  if (problem.empty() && mop == MPI_OP_NULL)
    problem = std::is_same_v<T, bool> && r == reduction::sum
                  ? "a sum of bool tensors is not a bool: cast to an integer type first, or "
                    "take max (any) or min (all)"
                  : "MPI could not create kiln's reduction operation";
  agree(op, comm, {problem.empty() ? 0 : 1, dtype_of<T>(), problem.empty() ? s : shape{}}, false,
        problem);
  in_pieces(buf.size(), [&](std::int64_t at, int n) {
    check(op, MPI_Allreduce(MPI_IN_PLACE, buf.data() + at, n, type_of<T>(), mop, comm),
          "MPI_Allreduce");
  });
}
} // namespace detail

// Reduces `t` over every rank of `comm` in place: each rank's t then holds the sum (max,
// min) of all ranks' values, elementwise. Same dtype and shape on every rank.
template <class T>
void allreduce_in_place(const tensor<T>& t, reduction r = reduction::sum,
                        MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::allreduce_in_place",
                                    "messages between ranks are not captured");
  const char* op = "mpi::allreduce";
  detail::returning_errors guard(op, comm);
  std::string problem = detail::problem_of(t);
  tensor<T> buf;
  if (problem.empty()) problem = detail::attempt([&] { buf = detail::packed(t); });
  detail::allreduce_packed(op, buf, problem, problem.empty() ? t.shape() : shape{}, r, comm);
  detail::unpack(t, buf);
}

// The reduction over every rank of an expression's values (a tensor's: never its storage),
// as a new tensor on the expression's device.
template <class E>
requires expression<E> tensor<value_t<E>> allreduce(const E& e, reduction r = reduction::sum,
                                                    MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::allreduce", "messages between ranks are not captured");
  const char* op = "mpi::allreduce";
  detail::returning_errors guard(op, comm);
  std::string problem;
  const tensor<value_t<E>> buf = detail::prepared(e, problem, detail::is_tensor<E>);
  detail::allreduce_packed(op, buf, problem, problem.empty() ? buf.shape() : shape{}, r, comm);
  return buf.to(kiln::detail::device_of(e));
}

// Root's values on every rank: on root, `e` evaluated; elsewhere a new tensor of root's
// dtype and shape on e's device (e itself is not read there: an empty tensor will do).
template <class E>
requires expression<E> tensor<value_t<E>> broadcast(const E& e, int root = 0,
                                                    MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::broadcast", "messages between ranks are not captured");
  using T = value_t<E>;
  const char* op = "mpi::broadcast";
  detail::returning_errors guard(op, comm);
  detail::check_root(op, root, comm);
  const bool is_root = rank(comm) == root;
  tensor<T> values;
  detail::header h{};
  std::string problem;
  if (is_root) {
    values = detail::prepared(e, problem, detail::is_tensor<E>);
    h = detail::signature(problem.empty() ? 0 : 1, dtype_of<T>(),
                          problem.empty() ? values.shape() : shape{})
            .v;
  }
  detail::share_header<T>(op, root, comm, h, problem);
  detail::ready(op, comm, is_root ? std::string() : detail::attempt([&] {
                  values = tensor<T>(detail::shape_of_header(h));
                }));
  detail::in_pieces(values.size(), [&](std::int64_t at, int n) {
    detail::check(op, MPI_Bcast(values.data() + at, n, detail::type_of<T>(), root, comm),
                  "MPI_Bcast");
  });
  return values.to(kiln::detail::device_of(e));
}

// Every rank's values, concatenated along the first dim in rank order, on root (a rank-0
// tensor counts as one element of shape [1]); elsewhere an empty tensor. The ranks' dtypes
// and trailing dims must agree; their first dims may differ (shards of unequal size).
template <class E>
requires expression<E> tensor<value_t<E>> gather(const E& e, int root = 0,
                                                 MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::gather", "messages between ranks are not captured");
  using T = value_t<E>;
  const char* op = "mpi::gather";
  detail::returning_errors guard(op, comm);
  detail::check_root(op, root, comm);
  std::string problem;
  const tensor<T> mine = detail::prepared(e, problem);
  const shape s = !problem.empty() ? shape{} : mine.rank() == 0 ? shape{1} : mine.shape();
  detail::agree(op, comm, {problem.empty() ? 0 : 1, dtype_of<T>(), s}, true, problem);
  const int ranks = size(comm), me = rank(comm);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(ranks));
  const std::int64_t my_rows = s[0];
  detail::check(op, MPI_Allgather(&my_rows, 1, MPI_INT64_T, rows.data(), 1, MPI_INT64_T, comm),
                "MPI_Allgather of the first dims");
  const std::int64_t inner = detail::row_size(s);
  std::int64_t total_rows = 0;
  std::vector<std::int64_t> counts;
  for (auto r : rows) {
    total_rows += r;
    counts.push_back(r * inner);
  }
  shape out_shape = s;
  out_shape[0] = total_rows;
  tensor<T> out;
  detail::ready(op, comm,
                me != root ? std::string() : detail::attempt([&] { out = tensor<T>(out_shape); }));
  detail::exchange_with_root(op, true, me == root ? out.data() : nullptr, mine.data(), counts, root,
                             comm);
  if (me != root) return {};
  return out.to(kiln::detail::device_of(e));
}

// Root's tensor split along its first dim into one part per rank, in rank order (rank k of
// p gets n/p rows, one more for k < n % p): this rank's part, on e's device. `e` is read on
// root only (elsewhere an empty tensor will do).
template <class E>
requires expression<E> tensor<value_t<E>> scatter(const E& e, int root = 0,
                                                  MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::scatter", "messages between ranks are not captured");
  using T = value_t<E>;
  const char* op = "mpi::scatter";
  detail::returning_errors guard(op, comm);
  detail::check_root(op, root, comm);
  const int ranks = size(comm), me = rank(comm);
  tensor<T> all;
  detail::header h{};
  std::string problem;
  if (me == root) {
    all = detail::prepared(e, problem);
    if (problem.empty() && all.rank() == 0) problem = "a rank-0 tensor has no first dim to split";
    h = detail::signature(problem.empty() ? 0 : 1, dtype_of<T>(),
                          problem.empty() ? all.shape() : shape{})
            .v;
  }
  detail::share_header<T>(op, root, comm, h, problem);
  const shape s = detail::shape_of_header(h);
  const std::int64_t inner = detail::row_size(s);
  auto rows_of = [&](int k) { return s[0] / ranks + (k < s[0] % ranks ? 1 : 0); };
  std::vector<std::int64_t> counts;
  for (int k = 0; k < ranks; ++k)
    counts.push_back(rows_of(k) * inner);
  shape part = s;
  part[0] = rows_of(me);
  tensor<T> mine;
  detail::ready(op, comm, detail::attempt([&] { mine = tensor<T>(part); }));
  detail::exchange_with_root(op, false, me == root ? all.data() : nullptr, mine.data(), counts,
                             root, comm);
  return mine.to(kiln::detail::device_of(e));
}

// Sends `e`'s values (dtype, shape and elements) to rank `dest` with `tag`; recv takes them.
// A tensor that cannot be sent (empty, or an expression that fails) is still announced, so
// the receiver fails too instead of waiting.
template <class E>
requires expression<E>
void send(const E& e, int dest, int tag = 0, MPI_Comm comm = MPI_COMM_WORLD) {
  kiln::detail::refuse_if_capturing("mpi::send", "messages between ranks are not captured");
  using T = value_t<E>;
  const char* op = "mpi::send";
  detail::returning_errors guard(op, comm);
  std::string problem;
  const tensor<T> values = detail::prepared(e, problem);
  const detail::header h = detail::signature(problem.empty() ? 0 : 1, dtype_of<T>(),
                                             problem.empty() ? values.shape() : shape{})
                               .v;
  detail::check(op, MPI_Send(h.data(), static_cast<int>(h.size()), MPI_INT64_T, dest, tag, comm),
                "MPI_Send of the dtype and shape");
  if (!problem.empty()) throw error(op, problem, "to rank " + std::to_string(dest));
  detail::send_pieces(op, values.data(), values.size(), dest, tag, comm);
}

// A tensor sent by `send` from rank `source` (or MPI_ANY_SOURCE) with `tag` (or
// MPI_ANY_TAG), on `dev`. Its dtype must be T: another is a kiln::error, after the message
// has been received (so the next one is not mistaken for it), as is a tensor this rank
// cannot hold.
template <class T>
tensor<T> recv(int source, int tag = 0, MPI_Comm comm = MPI_COMM_WORLD,
               const kiln::device& dev = {}) {
  kiln::detail::refuse_if_capturing("mpi::recv", "messages between ranks are not captured");
  const char* op = "mpi::recv";
  detail::returning_errors guard(op, comm);
  detail::header h{};
  MPI_Status st;
  detail::check(op,
                MPI_Recv(h.data(), static_cast<int>(h.size()), MPI_INT64_T, source, tag, comm, &st),
                "MPI_Recv of the dtype and shape");
  const std::string from =
      "from rank " + std::to_string(st.MPI_SOURCE) + ", tag " + std::to_string(st.MPI_TAG);
  if (h[0] != 0) throw error(op, "the sender could not send its tensor", from);
  const shape s = detail::shape_of_header(h);
  std::int64_t n = 1;
  for (auto d : s)
    n *= d;
  const auto sent = static_cast<dtype>(h[1]);
  std::string problem;
  if (sent != dtype_of<T>())
    problem = "the message's dtype is not the receiver's: " + std::string(kiln::name(sent)) +
              " sent, " + std::string(kiln::name(dtype_of<T>())) + " expected";
  tensor<T> t;
  if (problem.empty()) problem = detail::attempt([&] { t = tensor<T>(s); });
  if (!problem.empty()) {
    // Each of the sender's pieces is received, in its type, into no room at all: MPI takes
    // the message and says it was truncated, which is what this wants.
    detail::in_pieces(n, [&](std::int64_t, int) {
      char none[16];
      const int rc = MPI_Recv(none, 0, detail::type_of(sent), st.MPI_SOURCE, st.MPI_TAG, comm,
                              MPI_STATUS_IGNORE);
      int cls = MPI_SUCCESS;
      if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
      if (cls != MPI_SUCCESS && cls != MPI_ERR_TRUNCATE)
        detail::fail(op, rc, "MPI_Recv of a message this rank cannot keep");
    });
    throw error(op, problem, from);
  }
  detail::recv_pieces(op, t.data(), n, st.MPI_SOURCE, st.MPI_TAG, comm);
  return t.to(dev);
}

} // namespace kiln::mpi
