// The NCCL stand-in across processes: the ranks of a communicator made by
// ncclCommInitRank, wherever they run (threads of this process or other
// processes on this host, as mpirun starts them), meet in a POSIX
// shared-memory segment named by the unique id, as NCCL's shared-memory
// transport connects the GPUs of one host.
//
// The segment (mode 0600, named by 128 random bits of the id: a process
// must have been given the id to find it) holds each rank's device, process
// and current collective, a barrier and a mutex shared across processes
// (robust: a process that dies holding it does not hang the others), one
// staging chunk per rank and one mailbox per ordered pair of ranks. A
// collective moves through the chunks piece by piece: each rank copies a
// piece of its input in, all meet, each computes its own output piece from
// every rank's (reductions in rank order, the bits the in-process stand-in
// gives), all meet again. Sends and receives stream through the pair's
// mailbox, a group's progressing together. The first rank to join creates
// the segment and the last unlinks its name.
//
// The rules checked are those of one process (nccl_reference.cpp): the
// device index is the host's GPU, so two ranks on one device index are
// "Duplicate GPU" even from two processes; the ranks' collectives must
// match. A waiting rank notices a peer's process that has exited
// (ncclRemoteError, as NCCL's transports report a lost peer), and its own
// abort; the other ranks wait on an aborted peer until they time out.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "nccl_stand_in.h"

namespace baton::simt::ccl {

// Fills the id: the stand-in's tag and a random segment name.
void make_wire_id(ncclUniqueId* id);
// True when the id was made by make_wire_id.
bool is_wire_id(const ncclUniqueId& id);

// Joins rank `rank` of `nranks` on `device` to the id's segment: null with
// *code and *why on refusal (a mismatched rank count, a rank taken twice, a
// duplicate device, a system error).
std::shared_ptr<Wire> join_wire(const ncclUniqueId& id, int nranks, int rank, int device,
                                ncclResult_t* code, std::string* why);
// Every rank has joined.
bool wire_complete(Wire& w);
// Waits until every rank has joined (forever, as NCCL's blocking init).
void wait_wire_complete(Wire& w);
int wire_ranks(const Wire& w);
// Wakes the member's waits after it was aborted; unlinks the segment's
// name when the communicator never completed (no later rank can join).
void wire_abort(Wire& w);

// A rank's calls of one group over the wire (run_calls' contract).
void run_wire_calls(const std::shared_ptr<Member>& m, const std::vector<Call>& calls);

}  // namespace baton::simt::ccl
