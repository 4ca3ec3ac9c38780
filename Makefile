# tecs-profile: build, test, install, demo, bench.
#
#   make demo      build, then profile examples/demo.lua into demo-output/
#   make test      every test suite (installs missing system packages first)
#   make install   PREFIX=/usr/local (or LIBDIR=... LUADIR=... BINDIR=...)
#   make dist      the source rock and this machine's binary rock into dist/
#   make mcp-latest  the MCP server with the newest MCP clients (not in make test)
#   make bench     the benchmark (bench/run.sh all): prints tables, updates
#                  BENCHMARKS.md; pieces: bench-floor, bench-stop, bench-zones,
#                  bench-persample, bench-matrix, bench-autosave, bench-report

PREFIX     ?= /usr/local
LUA_VERSION = 5.1
LIBDIR     ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
LUADIR     ?= $(PREFIX)/share/lua/$(LUA_VERSION)
BINDIR     ?= $(PREFIX)/bin
# luarocks passes INST_* (see rockspec/); they win over the defaults above.
INST_LIBDIR ?= $(LIBDIR)
INST_LUADIR ?= $(LUADIR)
INST_BINDIR ?= $(BINDIR)

CARGO      ?= cargo
LUAJIT     ?= luajit
NATIVE_SO   = target/release/libtecs_profile.so
BUILD_SO    = build/lib/tecs/profile/native.so
# The LD_PRELOAD library of `tecs-profile love` (inject/), beside native.so.
PRELOAD_SO  = target/release/libtecs_profile_love_preload.so
BUILD_PRELOAD = build/lib/tecs/profile/love_preload.so

LUA_FILES  := $(shell find lua -name '*.lua' | sort)
# What modules read from beside them (the report page's style and scripts,
# lua/tecs/profile/page/), installed with them.
ASSET_FILES := $(shell find lua -name '*.css' -o -name '*.js' | sort)
RUST_FILES := $(shell find src crates inject/src -name '*.rs' | sort) Cargo.toml $(wildcard crates/*/Cargo.toml) inject/Cargo.toml

export LUA_PATH  := $(CURDIR)/lua/?.lua;$(CURDIR)/lua/?/init.lua;;
export LUA_CPATH := $(CURDIR)/build/lib/?.so;;

.PHONY: all build deps consumers mcp-latest test test-rust test-lua install uninstall demo bench clean nvim dist print-lua-files
.PHONY: soak fuzz valgrind tsan

all: build

build: $(BUILD_SO) $(BUILD_PRELOAD)

# One cargo build makes both libraries (the workspace's two members).
$(NATIVE_SO) $(PRELOAD_SO) &: $(RUST_FILES)
	@echo "building the native module (cargo, about a minute on a first build)"
	$(CARGO) build --release --workspace --locked || $(CARGO) build --release --workspace

# Copied beside the target and renamed into place: a process that has the
# old module loaded keeps its mapping instead of seeing the file change.
$(BUILD_SO): $(NATIVE_SO)
	mkdir -p $(dir $@)
	cp $(NATIVE_SO) $@.tmp && mv -f $@.tmp $@

$(BUILD_PRELOAD): $(PRELOAD_SO)
	mkdir -p $(dir $@)
	cp $(PRELOAD_SO) $@.tmp && mv -f $@.tmp $@

# Neovim finds lua/?.so on its runtime path: the module goes beside the Lua
# files for a checkout used as a plugin (lazy.nvim `build = "make nvim"`,
# docs/neovim.md). Copied and renamed into place, as above.
NVIM_SO = lua/tecs/profile/native.so
nvim: $(NVIM_SO)

$(NVIM_SO): $(NATIVE_SO)
	cp $(NATIVE_SO) $@.tmp && mv -f $@.tmp $@

deps:
	@bash scripts/deps.sh

# Outside programs the format tests feed our output to (inferno, speedscope, ajv),
# and the MCP clients the MCP server's tests drive it with (scripts/mcp-clients.sh
# pins them).
consumers:
	@bash scripts/consumers.sh

# The MCP server against the newest releases of the clients and of the
# specification's schema models (not part of `make test`): a release that
# breaks it shows here before users meet it.
mcp-latest: build
	MCP_CLIENTS=latest bash scripts/mcp-clients.sh
	MCP_CLIENTS=latest busted --lua=$(LUAJIT) spec/mcp_conformance_spec.lua spec/mcp_clients_spec.lua

test: deps consumers build
	@bash scripts/test.sh

test-rust: deps
	$(CARGO) test --no-default-features --features flamegraph,speedscope

test-lua: deps build
	busted --lua=$(LUAJIT) spec

install: build
	install -d $(INST_LIBDIR)/tecs/profile $(INST_LUADIR)/tecs/profile $(INST_LUADIR)/tecs/utils
	install -m 0755 -s $(NATIVE_SO) $(INST_LIBDIR)/tecs/profile/native.so
	install -m 0755 -s $(PRELOAD_SO) $(INST_LIBDIR)/tecs/profile/love_preload.so
	for f in $(LUA_FILES) $(ASSET_FILES); do \
	  rel=$${f#lua/}; install -d $(INST_LUADIR)/$$(dirname $$rel); \
	  install -m 0644 $$f $(INST_LUADIR)/$$rel; done
	install -d $(INST_BINDIR)
	sed -e 's|@LUADIR@|$(INST_LUADIR)|' -e 's|@LIBDIR@|$(INST_LIBDIR)|' bin/tecs-profile > $(INST_BINDIR)/tecs-profile
	chmod 0755 $(INST_BINDIR)/tecs-profile

# The package's Lua files and assets, one a line (scripts/dist.sh).
print-lua-files:
	@printf '%s\n' $(LUA_FILES) $(ASSET_FILES)

# A binary rock installs with `luarocks install FILE.rock`, no cargo needed
# (scripts/dist.sh says what each rock holds).
dist: build
	@bash scripts/dist.sh

uninstall:
	rm -f $(INST_LIBDIR)/tecs/profile/native.so $(INST_LIBDIR)/tecs/profile/love_preload.so
	rm -rf $(INST_LUADIR)/tecs/profile $(INST_LUADIR)/tecs/profile.lua $(INST_LUADIR)/tecs/utils/profile.lua
	rm -f $(INST_BINDIR)/tecs-profile

demo: deps build
	@mkdir -p demo-output
	$(LUAJIT) examples/demo.lua demo-output
	bin/tecs-profile flamegraph demo-output/demo.collapsed -o demo-output/demo.svg --title "examples/demo.lua"
	bin/tecs-profile flamegraph demo-output/demo.collapsed -o demo-output/demo-functions.svg --functions --title "examples/demo.lua by function"
	bin/tecs-profile flamegraph demo-output/demo.collapsed -o demo-output/demo.speedscope.json --title "examples/demo.lua"
	bin/tecs-profile report demo-output/demo.collapsed --min 1 -o demo-output/demo-report.txt
	bin/tecs-profile report demo-output/demo.collapsed --by zone --sort total --min 1 >> demo-output/demo-report.txt
	bin/tecs-profile report demo-output/demo.collapsed --mode vf --min 1 >> demo-output/demo-report.txt
	@cat demo-output/demo-report.txt
	@echo "wrote demo-output/demo.svg, demo-output/demo.speedscope.json, demo-output/demo-report.txt"

clean:
	$(CARGO) clean
	rm -rf build demo-output $(NVIM_SO)

# Robustness: a long mixed-fault run, fuzzing of the input parsers, and the
# memory and thread checkers (see docs/robustness.md).
SOAK_SECONDS ?= 600
FUZZ_SECONDS ?= 60

soak: deps build
	SOAK_SECONDS=$(SOAK_SECONDS) $(LUAJIT) scripts/soak.lua
	LUAJIT_BIN=$(LUAJIT) $(LUAJIT) scripts/owners_stress.lua cycles 10000
	LUAJIT_BIN=$(LUAJIT) $(LUAJIT) scripts/owners_stress.lua exits 1000

fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

valgrind: deps build
	@bash scripts/valgrind.sh

tsan: deps
	@bash scripts/tsan.sh

# Benchmarks (bench/run.sh has the pieces; each builds what it needs).
.PHONY: bench-floor bench-stop bench-zones bench-persample bench-matrix bench-autosave bench-report
bench: build
	@bash bench/run.sh all
bench-floor:
	@bash bench/run.sh floor
bench-stop:
	@bash bench/run.sh stop
bench-zones: build
	@bash bench/run.sh zonecost
bench-autosave: build
	@bash bench/run.sh autosave
bench-persample: build
	@bash bench/run.sh persample
bench-matrix: build
	@bash bench/run.sh matrix
bench-report:
	@bash bench/run.sh report
