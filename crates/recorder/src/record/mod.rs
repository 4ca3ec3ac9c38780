//! What runs while a session records: the record every capture of a stack
//! fills (`capture`), the callback LuaJIT calls with each sample, the stack
//! table it counts into, the timeline of its samples, and for allocation
//! sessions the allocator wrapper that triggers the samples (`alloc_hook`)
//! with what it counts (`alloc_objects`, `alloc_live`).

pub mod alloc_hook;
pub mod alloc_live;
pub mod alloc_objects;
pub mod capture;
pub mod identity;
pub mod sampler;
pub mod timeline;
