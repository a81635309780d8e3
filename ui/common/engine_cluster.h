// <baton/cluster/cluster_spec.h> for ui/ code. Its HostfileEntry has a member named
// `slots`, which is also Qt's keyword macro (defined empty): the engine
// header is read with the macro set aside. Use this header, not
// <baton/cluster/cluster_spec.h>, in ui/. Code that reads HostfileEntry::slots must
// #undef slots in its own .cpp (after its includes).
#pragma once

#pragma push_macro("slots")
#undef slots
#include <baton/cluster/cluster_spec.h>
#pragma pop_macro("slots")
