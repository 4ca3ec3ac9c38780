//! What runs while a session records: the tick source that decides when a
//! sample is taken, the record every capture of a stack fills (`capture`),
//! the callback LuaJIT calls with each sample, the stack table it counts
//! into, and the time line of its samples.

pub mod alloc_live;
pub mod alloc_objects;
pub mod capture;
pub mod fine_map;
pub mod identity;
pub mod sampler;
pub mod stack_table;
pub mod timeline;
