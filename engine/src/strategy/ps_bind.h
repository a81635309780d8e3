// Where a parameter server listens (PsJoin::bind): the address the job
// places it on, and no other. baton launch names each server's host as its
// hostfile or TF_CONFIG does; the server resolves that name on the host it
// runs on and listens only on the address it names there - refusing, with
// the name and both hosts' addresses, a name that does not name this host
// (rather than listen on every address).
#pragma once

#include <string>
#include <vector>

namespace baton::ps_bind {

// Server `server`'s entry of `bind` (one entry for every server, in server
// order, or one for all of them). InputError naming `what` when the count
// is neither.
const std::string& placed_host(const std::vector<std::string>& bind, int server, int servers,
                               const std::string& what);

// The numeric address `placed` (a host name or a numeric address) names on
// this host: of the addresses it resolves to, the first that is this
// host's (an interface's address, or 127/8), one off the loopback before a
// loopback one. InputError naming `what` when it does not resolve or names
// no address of this host.
std::string local_address(const std::string& placed, const std::string& what);

}  // namespace baton::ps_bind
