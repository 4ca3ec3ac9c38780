//! Time by plugin: the directory of a runtime path (Neovim's
//! `runtimepath`, or any list of roots a program gives) that each Lua
//! frame's file lies in.
//!
//! A Lua frame belongs to the plugin whose directory holds its file: the
//! longest of the given roots that contains it, else the directory a
//! runtime path's layout shows (the one above the last `lua/`, or above a
//! `plugin/`, `ftplugin/`, `after/`... directory). Neovim's own runtime
//! (`$VIMRUNTIME`, and the chunks built into the editor, named `vim/...`)
//! is [`NVIM`]; a directory named `nvim` that is not the runtime is the
//! user's configuration, [`CONFIG`]. A C function or builtin belongs to the
//! plugin of the Lua line that called it: `vim.api.nvim_buf_set_lines`
//! called from a plugin is that plugin's time. A file in no such directory
//! (`luafile /tmp/t.lua`) is its own key.

use std::collections::HashMap;

use crate::profile::frames::{self, FrameKind};

/// Neovim's runtime: `$VIMRUNTIME` and the chunks built into the editor.
pub const NVIM: &str = "nvim";
/// The user's configuration directory (`stdpath("config")`, a directory
/// named `nvim`).
pub const CONFIG: &str = "config";

/// The root frame a written file gets for a plugin (see
/// [`Plugins::root_frame`]): `[plugin NAME]`.
const ROOT_PREFIX: &str = "[plugin ";

/// Directories a runtime path entry has its Lua files in, besides `lua/`.
const RUNTIME_DIRS: &[&str] = &[
    "/plugin/",
    "/ftplugin/",
    "/after/",
    "/ftdetect/",
    "/autoload/",
    "/colors/",
    "/indent/",
    "/syntax/",
    "/compiler/",
];

/// Where plugins live: directories and their names.
#[derive(Clone, Debug, Default)]
pub struct Plugins {
    /// (directory without a trailing `/`, name), longest directory first.
    roots: Vec<(String, String)>,
}

impl Plugins {
    /// Plugins in `roots` (directory, name); a name left empty is the
    /// directory's last component. Trailing slashes do not count.
    pub fn new(roots: impl IntoIterator<Item = (String, String)>) -> Plugins {
        let mut roots: Vec<(String, String)> = roots
            .into_iter()
            .filter_map(|(dir, name)| {
                let dir = dir.trim_end_matches('/').to_string();
                if dir.is_empty() {
                    return None;
                }
                let name = if name.is_empty() { last_component(&dir).to_string() } else { name };
                Some((dir, name))
            })
            .collect();
        roots.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Plugins { roots }
    }

    /// The plugin of a Lua source file.
    pub fn of_file<'a>(&'a self, file: &'a str) -> &'a str {
        for (dir, name) in &self.roots {
            if file.len() > dir.len() && file.starts_with(dir.as_str()) && file.as_bytes()[dir.len()] == b'/' {
                return name;
            }
        }
        guess(file)
    }

    /// The plugin of each frame of a stack (caller first): a Lua frame's
    /// own, a root frame's name (see [`Plugins::root_frame`]), and for any
    /// other frame that of the nearest Lua frame below it (its caller); a
    /// frame with none below is its module (`[C]`, `string`).
    pub fn of_stack<'a>(&'a self, stack: &[&'a str], memo: &mut HashMap<&'a str, &'a str>) -> Vec<&'a str> {
        let mut keys: Vec<&'a str> = Vec::with_capacity(stack.len());
        let mut caller: Option<&'a str> = None;
        for &frame in stack {
            let key = match self.of_frame(frame, memo) {
                Some(k) => {
                    caller = Some(k);
                    k
                }
                None => caller.unwrap_or_else(|| frames::module(frame)),
            };
            keys.push(key);
        }
        keys
    }

    /// The plugin of a Lua frame or of a root frame; None for others.
    fn of_frame<'a>(&'a self, frame: &'a str, memo: &mut HashMap<&'a str, &'a str>) -> Option<&'a str> {
        if let Some(name) = frame.strip_prefix(ROOT_PREFIX).and_then(|f| f.strip_suffix(']')) {
            return Some(name);
        }
        if frames::kind(frame) != FrameKind::Lua {
            return None;
        }
        let file = frames::file_of(frame)?;
        Some(*memo.entry(file).or_insert_with(|| self.of_file(file)))
    }

    /// The root frame of a stack in a written file: `[plugin NAME]` for
    /// the key of its leaf (as [`Plugins::of_stack`] keys it); None for an
    /// empty stack.
    pub fn root_frame<'a>(&'a self, stack: &[&'a str], memo: &mut HashMap<&'a str, &'a str>) -> Option<String> {
        let leaf = *self.of_stack(stack, memo).last()?;
        Some(format!("{}{}]", ROOT_PREFIX, leaf))
    }
}

/// The last component of a directory path.
fn last_component(dir: &str) -> &str {
    dir.rsplit('/').next().unwrap_or(dir)
}

/// The plugin of a file no given root holds, from the layout of a runtime
/// path entry.
fn guess(file: &str) -> &str {
    // Built into the editor (`vim/_editor.lua`, `vim/shared.lua`), or its
    // runtime directory however it was installed.
    if file.starts_with("vim/") || file.contains("/nvim/runtime/") {
        return NVIM;
    }
    let dir = match file.rfind("/lua/") {
        Some(i) => &file[..i],
        None => match RUNTIME_DIRS.iter().filter_map(|d| file.rfind(d)).max() {
            Some(i) => &file[..i],
            // The configuration's own init.lua.
            None if file.ends_with("/nvim/init.lua") => &file[..file.len() - "/init.lua".len()],
            None => return file,
        },
    };
    let dir = dir.strip_suffix("/after").unwrap_or(dir);
    match last_component(dir) {
        "" => file,
        "nvim" => CONFIG,
        name => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_plugins_from_the_runtime_path_layout() {
        let p = Plugins::default();
        assert_eq!(p.of_file("/home/u/.local/share/nvim/lazy/plenary.nvim/lua/plenary/job.lua"), "plenary.nvim");
        assert_eq!(p.of_file("/usr/share/nvim/runtime/lua/vim/lsp/protocol.lua"), NVIM);
        assert_eq!(p.of_file("vim/filetype.lua"), NVIM, "a chunk built into the editor");
        assert_eq!(p.of_file("/p/start/Comment.nvim/plugin/Comment.lua"), "Comment.nvim");
        assert_eq!(p.of_file("/p/start/x.nvim/after/plugin/y.lua"), "x.nvim");
        assert_eq!(p.of_file("/home/u/.config/nvim/lua/user/keys.lua"), CONFIG);
        assert_eq!(p.of_file("/home/u/.config/nvim/init.lua"), CONFIG);
        assert_eq!(p.of_file("/home/u/.config/nvim/after/ftplugin/lua.lua"), CONFIG);
        assert_eq!(p.of_file("/tmp/t.lua"), "/tmp/t.lua", "outside every runtime path entry");
        assert_eq!(p.of_file("t.lua"), "t.lua");
    }

    #[test]
    fn given_roots_win_and_the_longest_holds() {
        let p = Plugins::new([
            ("/data/site/".to_string(), "site".to_string()),
            ("/data/site/pack/p/start/foo".to_string(), String::new()),
            ("/rt".to_string(), NVIM.to_string()),
        ]);
        assert_eq!(p.of_file("/data/site/pack/p/start/foo/lua/foo/init.lua"), "foo");
        assert_eq!(p.of_file("/data/site/plugin/x.lua"), "site");
        assert_eq!(p.of_file("/rt/lua/vim/diagnostic.lua"), NVIM);
        assert_eq!(p.of_file("/rtx/lua/a.lua"), "rtx", "a prefix that is not a whole directory");
    }

    #[test]
    fn c_functions_go_to_the_plugin_of_their_calling_line() {
        let p = Plugins::default();
        let mut memo = HashMap::new();
        let stack = [
            "/c/nvim/init.lua:3",
            "/l/foo.nvim/lua/foo.lua:10",
            "/usr/share/nvim/runtime/lua/vim/diagnostic.lua:5",
            "vim.api.nvim_buf_set_extmark",
        ];
        assert_eq!(p.of_stack(&stack, &mut memo), [CONFIG, "foo.nvim", NVIM, NVIM]);
        assert_eq!(p.of_stack(&["string.format", "/a/lua/b.lua:1"], &mut memo), ["string", "a"]);
        assert_eq!(p.root_frame(&stack, &mut memo).as_deref(), Some("[plugin nvim]"));
        assert_eq!(p.root_frame(&["[C:x]"], &mut memo).as_deref(), Some("[plugin [C]]"), "no Lua frame: its module");
        assert_eq!(p.root_frame(&[], &mut memo), None);
        assert_eq!(p.of_stack(&["[plugin foo.nvim]", "[C:x]"], &mut memo), ["foo.nvim", "foo.nvim"]);
        // Code loaded from a string: its caller's plugin, else one row for
        // all such code, not one per function.
        assert_eq!(p.of_stack(&["/a/lua/b.lua:1", "[string]:0-1"], &mut memo), ["a", "a"]);
        assert_eq!(p.of_stack(&["[string]:0-1", "[string]:3"], &mut memo), ["[string]", "[string]"]);
    }
}
