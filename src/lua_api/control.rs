//! The control channel's Lua side (`native.raw.listen`, `control_*`): the
//! listener a program polls, and the client's one-request calls. Requests
//! and answers cross as Lua tables shaped like their JSON, checked against
//! the protocol's types ([`crate::control::Request`], `Response`) on the
//! way in and out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mlua::{Lua, Table, UserData, UserDataMethods, Value};
use serde_json::{Map, Number, Value as Json};

use super::json::to_lua;
use super::options::describe;
use super::runtime;
use crate::control::files::{self, Confined, Kind};
use crate::control::http::{HttpRequest, HttpServer};
use crate::control::lines::{BoundedLines, Line};
use crate::control::{self, client, reads, server::Server, Accepts, Request, Response, Target};
use crate::sys::stop_signals;

/// A Lua value as JSON: a table with keys 1..n is an array (an empty table
/// too), another one an object with string keys.
fn to_json(v: &Value, depth: usize) -> mlua::Result<Json> {
    if depth > 16 {
        return Err(runtime("table nested too deeply"));
    }
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Json::from(*n as i64),
        Value::Number(n) => Number::from_f64(*n).map(Json::Number).ok_or_else(|| runtime("number is not finite"))?,
        Value::String(s) => Json::String(s.to_str()?.to_string()),
        Value::Table(t) => {
            let n = t.raw_len();
            let mut keys = 0usize;
            let mut object = Map::new();
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                keys += 1;
                if let Value::String(k) = &k {
                    object.insert(k.to_str()?.to_string(), to_json(&v, depth + 1)?);
                }
            }
            if keys == n {
                let mut array = Vec::with_capacity(n);
                for i in 1..=n {
                    array.push(to_json(&t.raw_get::<Value>(i)?, depth + 1)?);
                }
                Json::Array(array)
            } else if object.len() == keys {
                Json::Object(object)
            } else {
                return Err(runtime("table with keys that are neither 1..n nor strings"));
            }
        }
        other => return Err(runtime(format!("{} cannot be sent", describe(other)))),
    })
}

fn request_from(v: &Value) -> mlua::Result<Request> {
    serde_json::from_value(to_json(v, 0)?).map_err(|e| runtime(format!("bad request: {}", e)))
}

fn response_from(v: &Value) -> mlua::Result<Response> {
    serde_json::from_value(to_json(v, 0)?).map_err(|e| runtime(format!("bad answer: {}", e)))
}

fn lua_of<T: serde::Serialize>(lua: &Lua, x: &T) -> mlua::Result<Value> {
    to_lua(lua, &serde_json::to_value(x).map_err(|e| runtime(e.to_string()))?)
}

fn timeout_of(seconds: f64) -> mlua::Result<Duration> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(runtime(format!("bad argument 'timeout' (positive number of seconds expected, got {})", seconds)));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The program's listener (`native.raw.listen`), whether it armed the
/// wake-up (`sys::wake`, one per process), which it then disarms, and the
/// directories its clients may have it write in.
pub struct Listener(Option<Server>, bool, Confined);

fn kind_of(name: &str) -> mlua::Result<Kind> {
    Kind::from_name(name).ok_or_else(|| {
        runtime(format!("bad argument 'kind' (\"profile\", \"trace\" or \"functions\" expected, got {:?})", name))
    })
}

impl UserData for Listener {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // The next request as a table (`{ cmd = "start", ... }`), a line
        // that is not one as `{ invalid = message }`, or nil.
        methods.add_method_mut("next", |lua, this, ()| {
            let Some(server) = this.0.as_mut() else { return Ok(Value::Nil) };
            match server.next_request() {
                None => Ok(Value::Nil),
                Some(Ok(request)) => lua_of(lua, &request),
                Some(Err(message)) => {
                    let t = lua.create_table()?;
                    t.set("invalid", message)?;
                    Ok(Value::Table(t))
                }
            }
        });
        // Answers the request `next` returned; an answer that does not fit
        // the protocol is sent as an error that says why.
        methods.add_method_mut("reply", |_, this, answer: Value| {
            let Some(server) = this.0.as_mut() else { return Ok(()) };
            let response = response_from(&answer).unwrap_or_else(|e| Response::error(super::error_text(&e)));
            server.reply(&response);
            Ok(())
        });
        methods
            .add_method("socket", |_, this, ()| Ok(this.0.as_ref().map(|s| s.socket().to_string_lossy().into_owned())));
        methods
            .add_method("entry", |_, this, ()| Ok(this.0.as_ref().map(|s| s.entry().to_string_lossy().into_owned())));
        methods.add_method("pid", |_, _, ()| Ok(std::process::id()));
        // `place(path, kind)`: the absolute path of the file a client named
        // `path` (a bare name, or an absolute path), if it may have the
        // program write a file of `kind` there ("profile", "trace",
        // "functions"); else an error that says where it may.
        methods.add_method("place", |_, this, (path, kind): (mlua::LuaString, String)| {
            let place = this.2.place(&path.as_bytes(), kind_of(&kind)?).map_err(runtime)?;
            Ok(place.path.to_string_lossy().into_owned())
        });
        // `write(path, kind, text)`: writes `text` where `place` says,
        // checked again now; the path written.
        methods.add_method_mut("write", |_, this, (path, kind, text): (mlua::LuaString, String, mlua::LuaString)| {
            let kind = kind_of(&kind)?;
            let place = this.2.place(&path.as_bytes(), kind).map_err(runtime)?;
            let written = this.2.write(&place, &text.as_bytes(), kind).map_err(runtime)?;
            Ok(written.to_string_lossy().into_owned())
        });
        // The control directory, absolute.
        methods.add_method("controlDir", |_, this, ()| Ok(this.2.control_directory().to_string_lossy().into_owned()));
        // The directories clients may have the program write in, the one
        // bare names go to first.
        methods.add_method("outputDirs", |_, this, ()| {
            Ok(this.2.directories().iter().map(|p| p.to_string_lossy().into_owned()).collect::<Vec<_>>())
        });
        methods.add_method("isOpen", |_, this, ()| Ok(this.0.is_some()));
        // Removes the socket and the discovery entry (and stops waking).
        methods.add_method_mut("close", |lua, this, ()| {
            this.0 = None;
            #[cfg(target_os = "linux")]
            if std::mem::take(&mut this.1) {
                crate::sys::wake::disarm(Some(lua));
            }
            let _ = lua;
            Ok(())
        });
        // `wake(poll)`: a command that arrives runs `poll` at the VM's next
        // interpreted instruction, even if the program never polls (see
        // `sys::wake`); `false` and why not where that cannot be done.
        methods.add_method_mut("wake", |lua, this, poll: mlua::Function| {
            if this.1 {
                return Ok((true, None));
            }
            let Some(server) = this.0.as_mut() else { return Ok((false, Some("the channel is closed".to_string()))) };
            #[cfg(target_os = "linux")]
            {
                if let Err(why) = crate::sys::wake::arm(lua, poll) {
                    return Ok((false, Some(why)));
                }
                crate::sys::wake::watch(server.listener_fd());
                server.stop_doorbell();
                this.1 = true;
                Ok((true, None))
            }
            #[cfg(not(target_os = "linux"))]
            {
                let _ = (lua, poll, server);
                Ok((false, Some("waking needs Linux".to_string())))
            }
        });
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // The sockets close first: no SIGIO comes after the handler goes.
        self.0 = None;
        #[cfg(target_os = "linux")]
        if self.1 {
            crate::sys::wake::disarm(None);
        }
    }
}

/// A client's connection held open (`native.raw.controlConnect`);
/// `close` ends it (the program's channel then takes another client).
pub struct Connection(Option<client::Connection>);

impl UserData for Connection {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method_mut("request", |lua, this, (request, timeout): (Value, f64)| {
            let request = request_from(&request)?;
            let Some(c) = this.0.as_mut() else { return Err(runtime("the connection is closed")) };
            let answer = c.request(&request, timeout_of(timeout)?).map_err(runtime)?;
            lua_of(lua, &answer)
        });
        methods.add_method_mut("close", |_, this, ()| {
            this.0 = None;
            Ok(())
        });
    }
}

/// The live page's server (`native.raw.httpServe`), and the request it
/// handed out that waits for its answer.
pub struct LiveServer(HttpServer, Option<HttpRequest>);

impl UserData for LiveServer {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("url", |_, this, ()| Ok(this.0.url()));
        methods.add_method("port", |_, this, ()| Ok(this.0.port()));
        // `next(timeout)`: the path (after the secret) of the next request
        // to answer, or nil when none came in `timeout` seconds (or a
        // signal came). A request not answered yet is answered 503 first.
        methods.add_method_mut("next", |_, this, timeout: f64| {
            if let Some(r) = this.1.take() {
                r.reply(503, "text/plain", b"not answered\n");
            }
            let request = this.0.next(timeout_of(timeout)?).map_err(runtime)?;
            let path = request.as_ref().map(|r| r.path.clone());
            this.1 = request;
            Ok(path)
        });
        // `reply(status, contentType, body)`: answers the request `next`
        // returned.
        methods.add_method_mut("reply", |_, this, (status, content_type, body): (u16, String, mlua::LuaString)| {
            let Some(r) = this.1.take() else { return Err(runtime("no request waits for an answer")) };
            r.reply(status, &content_type, &body.as_bytes());
            Ok(())
        });
    }
}

/// `native.raw.httpServe(port)`: the live page's server on
/// 127.0.0.1:`port` (0: any free port).
fn http_serve(_: &Lua, port: u16) -> mlua::Result<LiveServer> {
    Ok(LiveServer(HttpServer::bind(port).map_err(runtime)?, None))
}

/// `native.raw.liveRedirect(url)`: a page of mode 0600 in the control
/// directory that sends a browser on to `url`; its path.
fn live_redirect(_: &Lua, url: String) -> mlua::Result<String> {
    let dir = control::directory(&control::default_directory()).map_err(runtime)?;
    let path = crate::control::http::redirect_page(&dir, &url).map_err(runtime)?;
    Ok(path.to_string_lossy().into_owned())
}

/// `native.raw.stopSignals(what)`: "catch" SIGINT, SIGTERM and SIGHUP
/// (recorded, not acted on), "release" them, or "caught": the name of the
/// one that came since catching, or nil.
fn stop_signals_fn(_: &Lua, what: String) -> mlua::Result<Option<&'static str>> {
    match what.as_str() {
        "catch" => stop_signals::catch().map_err(|e| runtime(format!("cannot catch the stop signals: {}", e)))?,
        "release" => stop_signals::release(),
        "caught" => return Ok(stop_signals::caught()),
        other => {
            return Err(runtime(format!(
                "bad argument 'what' (\"catch\", \"release\" or \"caught\" expected, got {:?})",
                other
            )))
        }
    }
    Ok(None)
}

fn directory_arg(dir: Option<String>) -> PathBuf {
    match dir {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => control::default_directory(),
    }
}

/// `native.raw.controlDirectory([dir])`: the control directory (the
/// default one without `dir`), created 0700 if missing and checked.
fn control_directory(_: &Lua, dir: Option<String>) -> mlua::Result<String> {
    let d = control::directory(&directory_arg(dir)).map_err(runtime)?;
    Ok(d.to_string_lossy().into_owned())
}

/// `native.raw.listen(dir, { program, kind, started, outputDir })`: opens
/// this process's socket and discovery entry in `dir` (default: the
/// control directory); clients may have it write there and in `outputDir`.
fn listen(_: &Lua, (dir, about): (Option<String>, Table)) -> mlua::Result<Listener> {
    let dir = control::directory(&directory_arg(dir)).map_err(runtime)?;
    let output: Option<String> = about.get("outputDir")?;
    if output.as_deref() == Some("") {
        return Err(runtime("option 'outputDir' must be a directory path string (got an empty string)"));
    }
    let confined = Confined::new(&dir, output.as_deref().map(Path::new)).map_err(runtime)?;
    let output_dir = output.is_some().then(|| confined.directories()[0].to_string_lossy().into_owned());
    let target = Target {
        pid: 0,
        program: about.get::<Option<String>>("program")?.unwrap_or_default(),
        kind: about.get::<Option<String>>("kind")?.unwrap_or_else(|| "luajit".into()),
        socket: String::new(),
        started: about.get::<Option<u64>>("started")?.unwrap_or(0),
        output_dir,
    };
    Ok(Listener(Some(Server::open(&dir, target).map_err(runtime)?), false, confined))
}

/// `native.raw.controlTargets([dir])`: the programs that can be attached
/// (dead ones removed), by pid.
fn control_targets(lua: &Lua, dir: Option<String>) -> mlua::Result<Value> {
    let list = control::targets(&directory_arg(dir)).map_err(runtime)?;
    lua_of(lua, &list)
}

/// `native.raw.controlRequest(socket, request, timeout)`: one request on
/// a connection of its own; the answer as a table.
fn control_request(lua: &Lua, (socket, request, timeout): (String, Value, f64)) -> mlua::Result<Value> {
    let request = request_from(&request)?;
    let answer = client::request(Path::new(&socket), &request, timeout_of(timeout)?).map_err(runtime)?;
    lua_of(lua, &answer)
}

/// `native.raw.clientFile(dir, name[, maxBytes])`: the size of the file
/// `name` directly in `dir` and, with `maxBytes`, its bytes (an error when
/// it is longer), read as a client's file is (`control::reads`: a regular
/// file of this user, no link followed, never waiting on a FIFO); an error
/// names the file and the rule it breaks.
fn client_file(lua: &Lua, (dir, name, max): (String, mlua::LuaString, Option<f64>)) -> mlua::Result<(f64, Value)> {
    let checked = reads::open(Path::new(&dir), &name.as_bytes()).map_err(runtime)?;
    let size = checked.size as f64;
    let Some(max) = max else { return Ok((size, Value::Nil)) };
    if !(max >= 0.0 && max.is_finite()) {
        return Err(runtime(format!("bad argument 'maxBytes' (a number of bytes expected, got {})", max)));
    }
    let bytes = checked
        .read(max as u64)
        .map_err(|e| runtime(format!("cannot read '{}': {}", String::from_utf8_lossy(&name.as_bytes()), e)))?;
    Ok((size, Value::String(lua.create_string(&bytes)?)))
}

/// The lines of the process's standard input, bounded
/// (`native.raw.stdinLines(maxBytes)`): `next()` answers a line, or false
/// and its length for a line longer than the bound (dropped), or nil at the
/// end of the input.
pub struct StdinLines(BoundedLines<std::io::Stdin>);

impl UserData for StdinLines {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method_mut("next", |lua, this, ()| {
            let line = this.0.next_line().map_err(|e| runtime(format!("cannot read standard input: {}", e)))?;
            Ok(match line {
                None => (Value::Nil, Value::Nil),
                Some(Line::Whole(bytes)) => (Value::String(lua.create_string(&bytes)?), Value::Nil),
                Some(Line::TooLong(n)) => (Value::Boolean(false), Value::Number(n as f64)),
            })
        });
    }
}

fn stdin_lines(_: &Lua, max: usize) -> mlua::Result<StdinLines> {
    if max == 0 {
        return Err(runtime("bad argument 'maxBytes' (a positive number of bytes expected, got 0)"));
    }
    Ok(StdinLines(BoundedLines::new(std::io::stdin(), max)))
}

/// `native.raw.controlConnect(socket)`: a connection kept open.
fn control_connect(_: &Lua, socket: String) -> mlua::Result<Connection> {
    Ok(Connection(Some(client::Connection::open(Path::new(&socket)).map_err(runtime)?)))
}

/// `native.raw.controlFields`: the bounds of the requests' fields
/// (`control::FIELDS`), by command and field: `{ start = { seconds = {
/// type = "number", minimum, maximum, what, expected } }, stop = { path = {
/// type = "string", maxLength, what, expected } }, ... }`, as the MCP
/// tools' schemas say them; `native.raw.controlFieldList`, the same in
/// their declared order, each with `command` and `name`; and
/// `native.raw.controlLimits`: `requestLine` (bytes), `idleSeconds`,
/// `profileEndings`, `traceEnding`.
fn control_tables(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    let fields = lua.create_table()?;
    let list = lua.create_table()?;
    for f in control::FIELDS {
        let command = match fields.get::<Option<Table>>(f.command)? {
            Some(t) => t,
            None => {
                let t = lua.create_table()?;
                fields.set(f.command, t.clone())?;
                t
            }
        };
        let t = lua.create_table()?;
        match f.accepts {
            Accepts::Number { min, max } | Accepts::Integer { min, max } => {
                t.set("type", if matches!(f.accepts, Accepts::Number { .. }) { "number" } else { "integer" })?;
                t.set("minimum", min)?;
                t.set("maximum", max)?;
            }
            Accepts::Text { max_bytes } => {
                t.set("type", "string")?;
                t.set("maxLength", max_bytes)?;
            }
        }
        t.set("what", f.what)?;
        t.set("expected", f.accepts.expected())?;
        command.set(f.name, t.clone())?;
        let listed = lua.create_table()?;
        for pair in t.pairs::<String, Value>() {
            let (k, v) = pair?;
            listed.set(k, v)?;
        }
        listed.set("command", f.command)?;
        listed.set("name", f.name)?;
        list.raw_set(list.raw_len() + 1, listed)?;
    }
    raw.set("controlFields", fields)?;
    raw.set("controlFieldList", list)?;
    let limits = lua.create_table()?;
    limits.set("requestLine", control::MAX_REQUEST_LINE)?;
    limits.set("idleSeconds", control::IDLE_LIMIT.as_secs_f64())?;
    limits.set("profileEndings", lua.create_sequence_from(files::profile_endings())?)?;
    limits.set("traceEnding", files::TRACE_ENDING)?;
    raw.set("controlLimits", limits)?;
    Ok(())
}

/// Adds the functions to `native.raw`.
pub fn register(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    control_tables(lua, raw)?;
    raw.set("listen", lua.create_function(listen)?)?;
    raw.set("controlDirectory", lua.create_function(control_directory)?)?;
    raw.set("controlTargets", lua.create_function(control_targets)?)?;
    raw.set("controlRequest", lua.create_function(control_request)?)?;
    raw.set("controlConnect", lua.create_function(control_connect)?)?;
    raw.set("clientFile", lua.create_function(client_file)?)?;
    raw.set("stdinLines", lua.create_function(stdin_lines)?)?;
    raw.set("httpServe", lua.create_function(http_serve)?)?;
    raw.set("liveRedirect", lua.create_function(live_redirect)?)?;
    raw.set("stopSignals", lua.create_function(stop_signals_fn)?)?;
    Ok(())
}
