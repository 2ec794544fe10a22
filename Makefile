# tally - a cumulative-sum microservice on OpenCL.
#
# `make help` lists the targets a person uses, grouped; its text is the
# HELP block below. Switches: SANITIZE=address,undefined (or thread),
# DEBUG=1 (no optimisation, every kernel launch waited for), V=1 (echo
# commands), T=pattern (run only matching tests), PYTEST_JOBS=N (the
# integration suite's parallel workers).

.DEFAULT_GOAL := all

CC      ?= cc
CXX     ?= c++
BUILD   ?= build
# The project's Python: the virtual environment `make deps-test` makes
# with Debian's python3-venv (deploy/install-deps.sh), first on PATH for
# every recipe, so the tests' and tools' `python3` is its python3.
# Building and running tallyd need no Python.
VENV    ?= build/venv
export PATH := $(abspath $(VENV))/bin:$(PATH)
PYTHON  ?= python3
PREFIX  ?= /usr/local

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 $(WARN) -D_POSIX_C_SOURCE=200809L -pthread -MMD -MP
# Include paths follow the layers (docs/design.md, "The layers"): each layer sees
# its own headers and those of the layers below it, never one above, so an
# upward include fails to compile. tests/check_layers.py checks the same
# from the #include lines, and finds cycles between files.
INC_common   := -Icommon
INC_engine   := -Iserver/engine $(INC_common)
INC_core     := -Iserver/core $(INC_engine)
# data formats (number text, JSON, .npy, protobuf's wire), then the
# protocols written in them (native, KServe, DirectML, Triton's
# settings); the transports see neither (tests/check_layers.py)
INC_format   := -Iserver/format $(INC_core)
INC_protocol := -Iserver/protocol $(INC_format)
INC_sched    := -Iserver/sched $(INC_core)
# the Redis client knows nothing of sequences, nor they of Redis: both
# meet at core/kv.h (the API layer joins them)
INC_redis    := -Iserver/redis $(INC_core)
INC_seq      := -Iserver/seq $(INC_core)
# the stores the sequences keep their states in, in this tallyd (memory,
# the log): versioned records, knowing nothing of sequences (core/kv.h)
INC_store    := -Iserver/store $(INC_core)
INC_http     := -Iserver/http $(INC_core)
INC_grpc     := -Iserver/grpc $(INC_core)
INC_telemetry := -Iserver/telemetry $(INC_core)
INC_api      := -Iserver/api -Iserver/sched -Iserver/seq -Iserver/store -Iserver/redis -Iserver/http \
                -Iserver/grpc -Iserver/telemetry $(INC_protocol)
# tallyd.c, the tests and the benchmark stand above everything
CPPFLAGS += $(INC_api)
LDLIBS  += -lOpenCL -lm -pthread
DAEMON_LIBS := -lmicrohttpd -lnghttp2 -lprotobuf-c -lhiredis -lssl -lcrypto -ljansson -luv -lz -ldeflate -lcurl -lstdc++
# format/numtext_conv.cc, the shim over fast_float and {fmt} (both header-only), is the
# only C++: no exceptions, no RTTI, the C code's warnings.
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -Werror -fno-exceptions -fno-rtti -MMD -MP
CXXFLAGS += -DNDEBUG

comma := ,
# DEBUG and SANITIZE builds assert which thread runs what (core/
# loop_owner.h's OWNER_ASSERT): the sanitizer legs of CI run with them.
ifeq ($(DEBUG),1)
CFLAGS  += -O0 -DTALLY_DEBUG -DTALLY_OWNER_ASSERTS
endif
ifneq ($(SANITIZE),)
CFLAGS  += -DTALLY_OWNER_ASSERTS
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
BUILD   := $(BUILD)-$(subst $(comma),-,$(SANITIZE))
endif
# FUZZ=1 (set by `make fuzz`): everything built with clang for libFuzzer,
# with AddressSanitizer and UndefinedBehaviorSanitizer, into build-fuzz/.
ifeq ($(FUZZ),1)
CC      := clang
CXX     := clang++
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
CFLAGS  += -fsanitize=fuzzer-no-link $(FUZZ_SAN)
CXXFLAGS += -fsanitize=fuzzer-no-link $(FUZZ_SAN)
LDFLAGS += $(FUZZ_SAN)
BUILD   := build-fuzz
endif

ifneq ($(V),1)
Q := @
endif

# ---------------------------------------------------------------- common
# What the client and the server share (common/, the tx_ names): built
# once, position-independent and hidden, and linked into both sides: into
# the engine's archive for tallyd and the tests, into libtally for the
# client and the CLI.
COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
$(COMMON_OBJ): CPPFLAGS := $(INC_common)
$(COMMON_OBJ): CFLAGS += -fPIC -fvisibility=hidden

# ---------------------------------------------------------------- engine
ENGINE_SRC := $(wildcard server/engine/*.c)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/kernels.o $(COMMON_OBJ)
ENGINE_LIB := $(BUILD)/libtally_engine.a
KERNELS    := kernels/scan.cl kernels/copy.cl

$(BUILD)/server/engine/%.o: CPPFLAGS := $(INC_engine)
# The gRPC messages' C code, generated from proto/grpc_service.proto by
# protobuf-c's compiler, goes with the protocols.
PB_GEN := $(BUILD)/gen/grpc_service.pb-c
$(BUILD)/server/format/%.o: CPPFLAGS := $(INC_format)
$(BUILD)/server/protocol/%.o: CPPFLAGS := $(INC_protocol) -I$(BUILD)/gen
$(BUILD)/server/core/%.o: CPPFLAGS := $(INC_core)
$(BUILD)/server/http/%.o: CPPFLAGS := $(INC_http)
$(BUILD)/server/grpc/%.o: CPPFLAGS := $(INC_grpc)
$(BUILD)/server/sched/%.o: CPPFLAGS := $(INC_sched)
$(BUILD)/server/seq/%.o: CPPFLAGS := $(INC_seq)
$(BUILD)/server/store/%.o: CPPFLAGS := $(INC_store)
$(BUILD)/server/redis/%.o: CPPFLAGS := $(INC_redis)
$(BUILD)/server/api/%.o: CPPFLAGS := $(INC_api) -I$(BUILD)/gen
$(BUILD)/server/telemetry/%.o: CPPFLAGS := $(INC_telemetry) -I$(BUILD)/gen
$(PB_GEN).o: CPPFLAGS := -I$(BUILD)/gen
$(PB_GEN).c $(PB_GEN).h: proto/grpc_service.proto
	@mkdir -p $(@D)
	$(Q)protoc-c --c_out=$(BUILD)/gen -Iproto $<
$(BUILD)/server/protocol/kserve_pb.o $(BUILD)/server/api/grpc_service.o: $(PB_GEN).h
# OTLP's trace messages (proto/otlp_trace.proto), for the span exporter
OTLP_GEN := $(BUILD)/gen/otlp_trace.pb-c
$(OTLP_GEN).o: CPPFLAGS := -I$(BUILD)/gen
$(OTLP_GEN).c $(OTLP_GEN).h: proto/otlp_trace.proto
	@mkdir -p $(@D)
	$(Q)protoc-c --c_out=$(BUILD)/gen -Iproto $<
$(BUILD)/server/telemetry/otlp.o: $(OTLP_GEN).h

# The host backend's inner loops are worth the extra optimisation.
$(BUILD)/server/engine/scan_host.o $(BUILD)/server/engine/tile_host.o $(BUILD)/server/engine/carry.o: CFLAGS += -O3 -Wno-psabi
# test_host includes scan_host.c, to test its two float32 copies
$(BUILD)/tests/server/engine/test_host.o: CFLAGS += -O3 -Wno-psabi

$(BUILD)/gen/kernels.c: $(KERNELS)
	@mkdir -p $(@D)
	$(Q)for k in $(KERNELS); do xxd -i $$k; done \
	  | sed -e 's/^unsigned/const unsigned/' > $@.tmp
	$(Q)mv $@.tmp $@

# The landing page, the docs page and the API's description, built into
# tallyd (api/landing.c and api/docs.c serve them). proto/openapi.json is
# the YAML's JSON form, kept in the tree: `make openapi-json` after editing
# the YAML (a test fails while they disagree).
WEB_FILES := server/web/index.html server/web/docs.html proto/openapi.yaml \
             proto/openapi.json
$(BUILD)/gen/web.c: $(WEB_FILES)
	@mkdir -p $(@D)
	$(Q)for f in $(WEB_FILES); do xxd -i $$f; done \
	  | sed -e 's/^unsigned/const unsigned/' > $@.tmp
	$(Q)mv $@.tmp $@

openapi-json:
	$(Q)$(PYTHON) tools/openapi_json.py

# Swagger UI for /docs: from Debian's python3-flasgger, which make deps
# unpacks into build/swagger-ui (tools/swagger_ui.sh; no Python needed),
# copied into share/tally/docs beside the build's bin/, where tallyd looks;
# without it the build goes on and /docs answers 404.
SWAGGER_DIR := build/swagger-ui
DOCS_DIR := $(BUILD)/share/tally/docs
docs-assets:
	$(Q)sh tools/swagger_ui.sh copy $(SWAGGER_DIR) $(DOCS_DIR)

$(ENGINE_LIB): $(ENGINE_OBJ)
	$(Q)$(AR) rcs $@ $^

# ---------------------------------------------------------------- daemon
# The codecs: the data formats and the protocols, which test_format,
# test_protocol, the fuzz targets and bench_numbers link without the rest
# of the daemon.
# With them go the status table (core/status.c), whose statuses they name,
# the checks of shared-memory region names (core/shm_ref.c), which they
# parse, the trace context (core/trace.c), whose span ids the OTLP encoder
# draws, content coding (core/content_coding.c), which the HTTP and gRPC
# doors share with them, the sequence ids' checks (core/sequence_id.c),
# which every protocol reads its sequence parameters with, and the
# invariants and the mutex that knows its holder (core/invariant.c,
# core/mutex.c), which the fanout helpers' list and lock assert with.
CODEC_SRC  := $(wildcard server/format/*.c server/protocol/*.c)
CODEC_CORE := server/core/status.c server/core/shm_ref.c server/core/trace.c \
              server/core/content_coding.c server/core/sequence_id.c \
              server/core/invariant.c server/core/mutex.c
CODEC_OBJ  := $(CODEC_SRC:%.c=$(BUILD)/%.o) $(BUILD)/server/format/numtext_conv.o \
              $(CODEC_CORE:%.c=$(BUILD)/%.o) \
              $(PB_GEN).o $(OTLP_GEN).o
DAEMON_SRC := $(filter-out $(CODEC_CORE),$(wildcard server/*.c \
              server/core/*.c server/sched/*.c server/seq/*.c server/store/*.c server/redis/*.c \
              server/http/*.c server/grpc/*.c \
              server/api/*.c server/telemetry/*.c))
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/web.o
TALLYD     := $(BUILD)/bin/tallyd

$(TALLYD): $(DAEMON_OBJ) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# ---------------------------------------------------------------- client
# libtally (shared, with a versioned soname and only the public API
# exported, and static), its pkg-config file, the `tally` CLI (which sees
# the public header only) and the example.
VERSION    := $(shell sed -n 's/^\#define TALLY_VERSION "\(.*\)"/\1/p' client/include/tally.h)
SOMAJOR    := $(firstword $(subst ., ,$(VERSION)))
CLIENT_SRC := $(wildcard client/lib/*.c)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o) $(COMMON_OBJ)
CLI_SRC    := $(wildcard client/cli/*.c)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIBDIR     := $(BUILD)/lib
CLIENT_A   := $(LIBDIR)/libtally.a
CLIENT_SO  := $(LIBDIR)/libtally.so.$(VERSION)
TALLY_CLI  := $(BUILD)/bin/tally
EXAMPLE    := $(BUILD)/bin/example_cumsum
CLIENT_LIBS := -lcurl -lm -pthread

$(CLIENT_SRC:%.c=$(BUILD)/%.o): CPPFLAGS := -Iclient/include -Iclient/lib -Icommon -DTALLY_BUILDING
$(CLIENT_SRC:%.c=$(BUILD)/%.o): CFLAGS += -fPIC -fvisibility=hidden
$(CLI_OBJ): CPPFLAGS := -Iclient/include -Icommon
$(BUILD)/client/examples/cumsum.o: CPPFLAGS := -Iclient/include

$(CLIENT_A): $(CLIENT_OBJ)
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CLIENT_SO): $(CLIENT_OBJ)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libtally.so.$(SOMAJOR) \
	  -Wl,--no-undefined -o $@ $^ $(CLIENT_LIBS)
	$(Q)ln -sf libtally.so.$(VERSION) $(LIBDIR)/libtally.so.$(SOMAJOR)
	$(Q)ln -sf libtally.so.$(SOMAJOR) $(LIBDIR)/libtally.so

# The CLI links the static library: one file to copy, nothing to find.
$(TALLY_CLI): $(CLI_OBJ) $(CLIENT_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS)

# The example links the shared library, as a user's program would.
$(EXAMPLE): $(BUILD)/client/examples/cumsum.o $(CLIENT_SO)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(LIBDIR) -ltally -Wl,-rpath,'$$ORIGIN/../lib'

CLIENT_ALL := $(CLIENT_A) $(CLIENT_SO) $(TALLY_CLI) $(EXAMPLE)

# ---------------------------------------------------------------- tests
TEST_NAMES := test_units test_core test_grpc test_format test_host test_engine test_accuracy
TEST_BINS  := $(TEST_NAMES:%=$(BUILD)/bin/%)
BENCH_BIN  := $(BUILD)/bin/bench_engine

TEST_LIB := $(BUILD)/tests/check.o $(BUILD)/tests/ref.o $(BUILD)/tests/temp_dir.o

# format/ on its own.
$(BUILD)/bin/test_format: $(BUILD)/tests/server/test_format.o $(TEST_LIB) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# protocol/ on its own: the codecs without the rest of the daemon.
$(BUILD)/bin/test_protocol: $(BUILD)/tests/server/test_protocol.o $(TEST_LIB) $(CODEC_OBJ) \
    $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

$(BUILD)/bin/%: $(BUILD)/tests/server/engine/%.o $(TEST_LIB) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# http/'s request, body and reply against a libmicrohttpd of the test's
# own, with libcurl as the client.
$(BUILD)/bin/test_http: $(BUILD)/tests/server/test_http.o $(TEST_LIB) \
    $(filter-out $(BUILD)/server/tallyd.o,$(DAEMON_OBJ)) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# The daemon's modules, and the gRPC door's insides, linked as tallyd is
# but for its main().
$(BUILD)/bin/test_grpc: $(BUILD)/tests/server/test_grpc.o $(TEST_LIB) \
    $(filter-out $(BUILD)/server/tallyd.o,$(DAEMON_OBJ)) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# core/ on its own.
$(BUILD)/bin/test_core: $(BUILD)/tests/server/test_core.o $(TEST_LIB) \
    $(filter $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# The scheduler on its own, with a fake backend and clock.
$(BUILD)/bin/test_sched: $(BUILD)/tests/server/test_sched.o $(BUILD)/tests/server/fake_sched.o \
    $(TEST_LIB) \
    $(filter $(BUILD)/server/sched/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# api/: the route table, and the one adapter (api/submit.c) on its own:
# a fake door, the scheduler over a fake backend and clock.
$(BUILD)/bin/test_api: $(BUILD)/tests/server/test_api.o $(BUILD)/tests/server/fake_sched.o \
    $(TEST_LIB) $(filter-out $(BUILD)/server/tallyd.o,$(DAEMON_OBJ)) $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# The sequences on their own (server/seq/): the table, the rules, the
# record format, the log, the shared store's logic over a fake store.
$(BUILD)/bin/test_seq: $(BUILD)/tests/server/test_seq.o $(BUILD)/tests/server/fake_kv.o \
    $(BUILD)/tests/server/redis_server.o $(TEST_LIB) \
    $(filter $(BUILD)/server/seq/%.o $(BUILD)/server/store/%.o $(BUILD)/server/redis/%.o \
      $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# This tallyd's own stores (server/store/): memory, and the log.
$(BUILD)/bin/test_store: $(BUILD)/tests/server/test_store.o $(TEST_LIB) \
    $(filter $(BUILD)/server/store/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)
$(BUILD)/tests/server/test_store.o: CPPFLAGS := $(INC_store) -Itests

# The model checker's replicas on a fake store (tests/model/driver.py
# --setup fake): the shared store's backend under faults Redis cannot give.
$(BUILD)/bin/model_fake: $(BUILD)/tests/model/fake_replicas.o $(BUILD)/tests/server/fake_kv.o \
    $(filter $(BUILD)/server/seq/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)
$(BUILD)/tests/model/fake_replicas.o: CPPFLAGS := $(INC_seq) -Itests/server

# The deterministic simulation of the sequences (tests/sim/): the engine
# over its stores, a fake clock and one seeded scheduler, every answer
# checked against the reference model.
SIM_OBJ := $(BUILD)/tests/sim/sim_seq.o $(BUILD)/tests/sim/sim_model.o
$(BUILD)/bin/sim_seq: $(SIM_OBJ) $(BUILD)/tests/sim/sim_sut.o $(BUILD)/tests/server/fake_kv.o \
    $(BUILD)/tests/temp_dir.o \
    $(filter $(BUILD)/server/seq/%.o $(BUILD)/server/store/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)
$(BUILD)/tests/sim/%.o: CPPFLAGS := $(INC_seq) -Iserver/store -Itests -Itests/server -Itests/sim

# The Redis client (server/redis/), against a redis-server the test starts.
$(BUILD)/bin/test_redis: $(BUILD)/tests/server/test_redis.o $(BUILD)/tests/server/redis_server.o $(TEST_LIB) \
    $(filter $(BUILD)/server/redis/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# The client's tests: the shared library, the engine's host reference.
$(BUILD)/tests/test_client.o: CPPFLAGS += -Iclient/include -Itests
$(BUILD)/tests/server/engine/%.o: CPPFLAGS += -Itests
$(BUILD)/tests/server/test_core.o: CPPFLAGS := $(INC_core) -Itests
$(BUILD)/tests/server/test_grpc.o: CPPFLAGS += -Itests
$(BUILD)/tests/server/test_sched.o: CPPFLAGS := $(INC_sched) -Itests -Itests/server
$(BUILD)/tests/server/fake_sched.o: CPPFLAGS := $(INC_sched) -Itests
$(BUILD)/tests/server/test_seq.o: CPPFLAGS := $(INC_seq) -Iserver/store -Iserver/redis -Itests
$(BUILD)/tests/server/fake_kv.o: CPPFLAGS := $(INC_core) -Itests
$(BUILD)/tests/server/test_redis.o: CPPFLAGS := $(INC_redis) -Itests
$(BUILD)/tests/server/redis_server.o: CPPFLAGS := -Itests
$(BUILD)/tests/server/test_api.o: CPPFLAGS := $(INC_api) -Itests -Itests/server
$(BUILD)/tests/server/test_protocol.o: CPPFLAGS := $(INC_protocol) -Itests -I$(BUILD)/gen
$(BUILD)/tests/server/test_format.o: CPPFLAGS := $(INC_format) -Itests
$(BUILD)/tests/server/test_protocol.o: $(PB_GEN).h
$(BUILD)/tests/server/test_http.o: CPPFLAGS := $(INC_http) -Itests
$(BUILD)/bin/test_client: $(BUILD)/tests/test_client.o $(TEST_LIB) $(ENGINE_LIB) $(CLIENT_SO)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -L$(LIBDIR) -ltally \
	  -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)

$(BENCH_BIN): $(BUILD)/tests/bench/bench_engine.o $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the scheduler's tick with many jobs waiting
$(BUILD)/tests/bench/bench_sched.o: CPPFLAGS := $(INC_sched)
$(BUILD)/bin/bench_sched: $(BUILD)/tests/bench/bench_sched.o \
    $(filter $(BUILD)/server/sched/%.o $(BUILD)/server/core/%.o,$(DAEMON_OBJ)) \
    $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# one durable append's cost on this machine, alone (make bench-serve's
# sequence table measures the floor beside tallyd)
$(BUILD)/bin/fsync_latency: $(BUILD)/tests/bench/fsync_latency.o
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^

# a record's hop to a writer thread and back, alone (the floor under
# --state-fsync everysec; make bench-serve's sequence table measures it)
$(BUILD)/bin/hop_latency: $(BUILD)/tests/bench/hop_latency.o
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -luv -pthread

# one Redis write on a request's own loop, alone (the floor under
# --state-store at concurrency 1), and its serve mode, the smallest
# server doing a chunk's work for perf_analyzer (the floor at 16); make
# bench-serve's sequence table measures both
$(BUILD)/bin/store_floor: $(BUILD)/tests/bench/store_floor.o $(BUILD)/tests/bench/floor.o
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -pthread

# the smallest libmicrohttpd server, a static answer to every request:
# what libmicrohttpd alone costs a small request (make bench-serve
# BENCH_ARGS="--only small" runs it beside tallyd and nginx)
$(BUILD)/bin/mhd_floor: $(BUILD)/tests/bench/mhd_floor.o
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lmicrohttpd

# store_floor serve's work over gRPC, for perf_analyzer -i grpc: the
# smallest h2c server that answers a chunk in memory or through Redis
$(BUILD)/bin/grpc_floor: $(BUILD)/tests/bench/grpc_floor.o $(BUILD)/tests/bench/floor.o \
    $(PB_GEN).o
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lnghttp2 -lprotobuf-c -pthread
$(BUILD)/tests/bench/grpc_floor.o: CPPFLAGS := -I$(BUILD)/gen -Itests/bench
$(BUILD)/tests/bench/grpc_floor.o: $(PB_GEN).h

$(BUILD)/bin/bench_numbers: $(BUILD)/tests/bench/bench_numbers.o $(CODEC_OBJ) $(ENGINE_LIB)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets (tests/fuzz/fuzz_*.c), each with its seed corpus in
# tests/fuzz/<name>/. `make fuzz FUZZ_SECONDS=N` builds them with FUZZ=1
# and runs each for N seconds (30 by default; FUZZ_RUNS=N runs each N
# times instead; FUZZ_TARGETS picks some),
# from a working corpus in build-fuzz/corpus/<name> that starts as the
# seeds; a crash, leak, timeout or failed property stops it with the input
# in build-fuzz/crash/.
FUZZ_NAMES   := $(filter-out fuzzlib,$(notdir $(basename $(wildcard tests/fuzz/fuzz_*.c))))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_SECONDS ?= 30
FUZZ_BINS    := $(FUZZ_NAMES:%=$(BUILD)/bin/%)
FUZZ_DAEMON  := $(filter-out $(BUILD)/server/tallyd.o,$(DAEMON_OBJ)) $(CODEC_OBJ) $(ENGINE_LIB)

$(BUILD)/tests/fuzz/%.o: CPPFLAGS += -Itests/fuzz
$(BUILD)/tests/fuzz/fuzz_grpc.o: CPPFLAGS += -I$(BUILD)/gen
$(BUILD)/tests/fuzz/fuzz_grpc.o: $(PB_GEN).h
$(BUILD)/tests/fuzz/fuzz_trace.o: CPPFLAGS += -I$(BUILD)/gen
$(BUILD)/tests/fuzz/fuzz_trace.o: $(OTLP_GEN).h
$(BUILD)/tests/fuzz/fuzz_client_%.o: CPPFLAGS := -Iclient/include -Iclient/lib -Icommon \
    -Itests/fuzz -DTALLY_BUILDING
# A client harness includes the .c file it tests; from the archive, the
# linker takes only the other members.
$(BUILD)/bin/fuzz_client_%: $(BUILD)/tests/fuzz/fuzz_client_%.o $(BUILD)/tests/fuzz/fuzzlib.o \
    $(CLIENT_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(CLIENT_LIBS) -ljansson $(LDLIBS)
$(BUILD)/bin/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzzlib.o \
    $(BUILD)/tests/fuzz/fuzzd.o $(FUZZ_DAEMON)
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(DAEMON_LIBS) $(LDLIBS)

fuzz: fuzz-deps
	$(Q)$(MAKE) --no-print-directory FUZZ=1 fuzz-run

# clang and its runtime (libFuzzer, the sanitizers), installed when missing
fuzz-deps:
	$(Q)if ! command -v clang >/dev/null 2>&1 \
	     || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then \
	  echo "fuzz: installing clang and libclang-rt-dev"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends clang libclang-rt-dev >/dev/null; fi

fuzz-build: $(FUZZ_BINS)

fuzz-run: $(FUZZ_TARGETS:%=$(BUILD)/bin/%)
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) BUILD=$(BUILD) \
	  bash tests/fuzz/run.sh $(FUZZ_TARGETS)

# ---------------------------------------------------------------- rules
$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cc
	@mkdir -p $(@D)
	@echo "  CXX     $<"
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer) -c -o $@ $<

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

.PHONY: install uninstall test-install

# ---------------------------------------------------------------- install
# make install PREFIX=/opt/tally (default /usr/local; DESTDIR for staging)
INSTALL_LIB := $(DESTDIR)$(PREFIX)/lib
# The docs, where the tree has them (the image's build copies only the
# sources, and installs none).
DOC_FILES := $(wildcard README.md LICENSE CHANGELOG.md docs/*.md docs/*.png)
DOC_PICS  := $(wildcard docs/perf/*.png)
install: $(TALLYD) $(TALLY_CLI) $(CLIENT_A) $(CLIENT_SO)
	$(Q)install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include \
	  $(INSTALL_LIB)/pkgconfig
	$(Q)install -m 755 $(TALLYD) $(TALLY_CLI) $(DESTDIR)$(PREFIX)/bin/
	$(Q)install -m 644 client/include/tally.h $(DESTDIR)$(PREFIX)/include/
	$(Q)install -m 644 $(CLIENT_A) $(INSTALL_LIB)/
	$(Q)install -m 755 $(CLIENT_SO) $(INSTALL_LIB)/
	$(Q)ln -sf libtally.so.$(VERSION) $(INSTALL_LIB)/libtally.so.$(SOMAJOR)
	$(Q)ln -sf libtally.so.$(SOMAJOR) $(INSTALL_LIB)/libtally.so
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$${prefix}/lib|' \
	  -e 's|@INCLUDEDIR@|$${prefix}/include|' -e 's|@VERSION@|$(VERSION)|' \
	  client/tally.pc.in > $(INSTALL_LIB)/pkgconfig/tally.pc
	$(Q)if [ -f $(DOCS_DIR)/swagger-ui-bundle.js ]; then \
	  install -d $(DESTDIR)$(PREFIX)/share/tally/docs && \
	  install -m 644 $(DOCS_DIR)/* $(DESTDIR)$(PREFIX)/share/tally/docs/; fi
	$(Q)$(if $(filter-out docs/%,$(DOC_FILES)),install -D -m 644 -t $(DESTDIR)$(PREFIX)/share/doc/tally \
	  $(filter-out docs/%,$(DOC_FILES)))
	$(Q)$(if $(filter docs/%,$(DOC_FILES)),install -D -m 644 -t $(DESTDIR)$(PREFIX)/share/doc/tally/docs \
	  $(filter docs/%,$(DOC_FILES)))
	$(Q)$(if $(DOC_PICS),install -D -m 644 -t $(DESTDIR)$(PREFIX)/share/doc/tally/docs/perf $(DOC_PICS))
	$(Q)if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then ldconfig 2>/dev/null || true; fi
	@echo "install: tallyd, tally, libtally $(VERSION) and tally.pc under $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tallyd $(DESTDIR)$(PREFIX)/bin/tally \
	  $(DESTDIR)$(PREFIX)/include/tally.h $(INSTALL_LIB)/libtally.a \
	  $(INSTALL_LIB)/libtally.so $(INSTALL_LIB)/libtally.so.$(SOMAJOR) \
	  $(INSTALL_LIB)/libtally.so.$(VERSION) $(INSTALL_LIB)/pkgconfig/tally.pc
	rm -rf $(DESTDIR)$(PREFIX)/share/tally/docs $(DESTDIR)$(PREFIX)/share/doc/tally

# Installs into a scratch prefix and builds the example from it with
# pkg-config, as a user would; checks the soname and the exported symbols.
test-install: $(TALLYD) $(TALLY_CLI) $(CLIENT_A) $(CLIENT_SO)
	$(Q)rm -rf $(BUILD)/install-test
	$(Q)$(MAKE) --no-print-directory install PREFIX=$(abspath $(BUILD))/install-test >/dev/null
	$(Q)CC="$(CC) $(if $(SANITIZE),-fsanitize=$(SANITIZE))" VERSION=$(VERSION) \
	  sh tests/install_check.sh $(abspath $(BUILD))/install-test

.PHONY: fuzz fuzz-deps fuzz-build fuzz-run test-tsan test-asan docs-assets openapi-json \
        check-docs docs-config docs-errors
.PHONY: all run load image test check check-python check-targets warm-kernels test-c check-layers test-core test-grpc test-sched test-seq test-store test-sim test-api test-redis test-protocol test-http test-integration test-container test-bare test-units test-format test-host test-engine test-kernels test-accuracy \
        bench-report bench-peers bench-node bench-node-bundle bench-node-tiny bench-engine bench-transpose bench-lines bench-sched bench-numbers bench-json bench-serve bench-loop bench-start bench-client soak \
        deps deps-venv deps-test deps-bench clean format help

# `make help`: the targets a person uses, one line each. Internal steps
# (fuzz-run, fuzz-build, fuzz-deps, docs-assets, check-python, warm-kernels, the single
# C suites that test-c runs) are left out; the comments above each target
# say more.
define HELP
Use
  make run              install, build, start tallyd on 127.0.0.1:8080 (LISTEN= ARGS=)
  make                  build everything into build/
  make install          tallyd, tally, libtally, tally.pc and the docs under PREFIX (DESTDIR)
  make uninstall        remove what make install put there
  make image            the container image tally:VERSION, built with podman
  make deps             the packages building and running tallyd need
  make clean            remove build/ and build-*/

Develop
  make check            the everyday loop: layers, C suites, fast integration tests
                        (two minutes warm; it prints its time)
  make check-targets    every target here started, the quickest way that runs its
                        recipe (CI's stage targets)
  make test             everything: installs test packages, every test, the container
                        (less the kernel layouts: test-kernels, CI's asan)
  make test-c           the C test programs (T=name picks cases)
  make test-kernels     the engine's kernel-layout cases, which make test leaves out
  make test-integration the integration suite in parallel (T= PYTEST_JOBS=)
  make test-sim         the sequences' simulation for SIM_SECONDS (TALLY_SIM_SEED=N
                        replays one seed)
  make test-asan        C suites and integration tests under ASan and UBSan
  make test-tsan        C suites and concurrent integration tests under TSan
  make fuzz             every libFuzzer target, FUZZ_SECONDS each, two at a time
  make test-container   build the image and run it with podman
  make test-bare        make run and a first request on a bare Debian 12, in podman
  make test-install     install into a scratch prefix and build against it
  make check-layers     the #include lines against the layers, and the threads named
                        in comments against tallyd's list
  make check-docs       the docs against the tree: links, paths, settings, errors,
                        metrics, alerts, targets, the README's ready lines
  make docs-config      docs/configuration.md's table from config.h
  make docs-errors      docs/errors.md's tables from status.h and tally.h
  make soak             a long mixed load (statuses, memory, descriptors), then the
                        simulation and the model checker on each setup
                        (MODEL_SECONDS)
  make deps-test        the tests' packages (Python's into build/venv)
  make format           clang-format every C file
  make openapi-json     proto/openapi.json from the YAML

Benchmark
  make bench-report     docs/performance.md's tables and pictures, measured anew
  make bench-peers      tally beside MLServer, KServe and FastAPI (perf_analyzer)
  make bench-engine     the engine against a copy and numpy
  make bench-transpose  what the machine allows for a transposing scan
  make bench-lines      what the machine allows for the 1M rows
  make bench-numbers    number text, printed and parsed, per dtype
  make bench-sched      the scheduler's tick with many jobs waiting
  make bench-json       JSON requests through tallyd beside Python's json
  make bench-serve      throughput and latency under load (perf_analyzer)
  make bench-loop       REST deadlines while gRPC decodes a large message
  make bench-start      start to the first 200 on a cold kernel cache
  make bench-node       a whole node in one run: device, engine, service, threads
  make bench-node-bundle the tools and libraries bench-node needs on a bare node
  make bench-client     what splitting a tensor over requests costs
  make load             wrk against tallyd, beside nginx's ceiling

Switches: SANITIZE=address,undefined|thread  DEBUG=1  V=1  T=pattern
endef
export HELP
help:
	@echo "$$HELP"

all: docs-assets $(ENGINE_LIB) $(TALLYD) $(TEST_BINS) $(BUILD)/bin/test_sched $(BUILD)/bin/test_api $(BENCH_BIN) \
    $(BUILD)/bin/bench_sched \
    $(BUILD)/bin/bench_numbers $(BUILD)/bin/fsync_latency $(BUILD)/bin/hop_latency $(BUILD)/bin/store_floor \
    $(BUILD)/bin/mhd_floor \
    $(BUILD)/bin/model_fake \
    $(BUILD)/bin/grpc_floor $(CLIENT_ALL) $(BUILD)/bin/test_client

# Every test gets its own PoCL kernel cache: concurrent processes sharing
# one crash PoCL. Within one `make test` the directory is reused, so each
# test after the first finds its kernels already compiled.
POCL_DIR := $(abspath build)/pocl-cache
# ASan's __tls_get_addr interceptor (GCC up to 13, LLVM up to 16) can take
# a dynamic TLS block (PoCL's, dlopened) for an old glibc header by the
# accident of its address, and LeakSanitizer's tracer then dies at exit
# ("Tracer caught signal 11") after every test passed: off.
ASAN_ENV := ASAN_OPTIONS=intercept_tls_get_addr=0$(if $(ASAN_OPTIONS),:$(ASAN_OPTIONS))
TEST_ENV := POCL_CACHE_DIR=$(POCL_DIR) $(ASAN_ENV) \
            LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1

# What the tests run: the C suites, tallyd, libtally, the CLI and the
# example (the sanitizer legs build these, not the benchmarks).
TEST_PROGRAMS = $(TEST_BINS) $(BUILD)/bin/test_sched $(BUILD)/bin/test_api \
                $(BUILD)/bin/test_seq $(BUILD)/bin/test_store $(BUILD)/bin/test_redis $(BUILD)/bin/sim_seq \
                $(BUILD)/bin/test_protocol $(BUILD)/bin/test_http $(TALLYD) $(CLIENT_ALL) \
                $(BUILD)/bin/test_client docs-assets

# The C test programs, one after another (they share POCL_DIR). The first
# to compile kernels is test-engine; every later one, and every daemon of
# the integration suite, finds them in the cache.
C_TESTS := test-units test-core test-grpc test-sched test-seq test-store test-sim test-api test-redis test-protocol test-http test-format test-host test-engine test-accuracy

# `make test`, the README's command: installs whatever the tests need (a
# no-op when all is there), then runs everything a user's machine can:
# the layer check, the C suites (less the engine's kernel layouts, below),
# `make install` checked, the whole integration suite with its browser
# tests, and the container image.
# The integration suite, the container test and the bare-Debian test run
# at once (their output is kept apart): the first waits on sockets, the
# others on podman and apt; the integration suite and the container test
# together took 300 s here against 360 one after the other.
test: deps-test
	$(Q)$(MAKE) --no-print-directory check-layers check-docs
	$(Q)$(MAKE) --no-print-directory test-c ENGINE_CASES="$(addprefix -,$(ENGINE_LAYOUTS))"
	$(Q)$(MAKE) --no-print-directory warm-kernels test-install bench-node-tiny
	$(Q)$(MAKE) --no-print-directory -j3 --output-sync=target test-integration test-container test-bare \
	  TALLY_IMAGE_TESTS=0

# The kernels a daemon builds at its start (tallyd --warm-cache), built
# once into POCL_DIR, which every daemon of the integration suite copies:
# the engine's cases build the same kernels but not every launch shape
# the warm-up runs, and each daemon that missed one spent 7 s of CPU on
# two cores compiling it.
warm-kernels: $(TALLYD)
	$(Q)mkdir -p $(POCL_DIR) && POCL_CACHE_DIR=$(POCL_DIR) $(TALLYD) --warm-cache --access-log=off \
	  >$(BUILD)/warm-kernels.log 2>&1 || { cat $(BUILD)/warm-kernels.log; exit 1; }

# `make check`, the everyday loop: the layer check, every C suite (the
# simulation for CHECK_SIM_SECONDS) and the integration tests not marked
# slow (tests/integration/conftest.py says which are; the model checker's
# budgets scaled by CHECK_MODEL_SECONDS, `make test` runs them whole), on a
# build made if needed; no package install, no browser, no container, no target started
# (check-targets, CI's), no benchmark (bench-node-tiny is make test's).
# Two minutes on a warm build and kernel cache; it prints its time.
CHECK_SIM_SECONDS ?= 5
CHECK_MODEL_SECONDS ?= 0.5
check:
	$(Q)start=$$(date +%s); \
	  $(MAKE) --no-print-directory check-python check-layers check-docs \
	  && $(MAKE) --no-print-directory test-c warm-kernels SIM_SECONDS=$(CHECK_SIM_SECONDS) \
	  && TALLY_MODEL_SECONDS=$(CHECK_MODEL_SECONDS) $(MAKE) --no-print-directory test-integration \
	       PYTEST_SELECT='-m "not slow" $(NO_BROWSER)'; \
	  rc=$$?; echo "make check: $$([ $$rc = 0 ] && echo passed || echo FAILED) in \
	$$(($$(date +%s) - start)) s"; exit $$rc

# Every target `make help` lists, started the quickest way that still runs
# its recipe (tools/check_targets.py says how each is): three minutes or
# so, a few at a time. CI runs it (.ci/run, stage targets), after the
# soak has installed what the benchmarks need.
check-targets:
	$(Q)python3 tools/check_targets.py

# The C suites alone, one after another whatever -j says (they share
# POCL_DIR); all of them run, and it fails if any failed.
test-c:
	$(Q)rc=0; for t in $(C_TESTS); do \
	  $(MAKE) --no-print-directory $$t || { rc=1; echo "test-c: $$t FAILED"; }; \
	done; exit $$rc

# What the sanitizers can see: the C test programs, and every integration
# test against a daemon, libtally and CLI built with AddressSanitizer and
# UndefinedBehaviorSanitizer; not the package installs, the browser (its
# pages are tested against this daemon by test_landing and test_docs), `make
# install` or the container, which build nothing with the sanitizers; nor
# the tests marked `peer` (perf_analyzer, a Dask cluster and schemathesis driving
# tallyd: most of their time is the tool's own, and the server code they
# reach is what tallyd's own clients reach in the other tests; the plain
# leg runs them against the plain build), nor those marked `outage`
# (replicas and Redis killed under load: test_redis and the other
# store tests reach the same reconnect and failure paths here). Its
# daemons run the host backend (TEST_DEVICE=host) unless a test names a
# device or is marked `opencl` (test_devices): PoCL cannot be instrumented,
# its kernel build at each start cost 1.7 s of CPU a daemon under ASan
# against 0.5 s, and test_engine's cl cases and test_devices drive tallyd's
# OpenCL code here. CI runs it.
test-asan: $(if $(SANITIZE),,deps-venv)
ifneq ($(SANITIZE),address$(comma)undefined)
	$(Q)$(MAKE) --no-print-directory SANITIZE=address,undefined test-asan
else
	$(Q)$(MAKE) --no-print-directory $(TEST_PROGRAMS)
	$(Q)$(MAKE) --no-print-directory test-c
	$(Q)$(MAKE) --no-print-directory test-integration TEST_DEVICE=host \
	  PYTEST_SELECT='-m "not peer and not outage" $(NO_BROWSER)'
endif

# The #include lines against the layers, the threads the comments name
# against the threads tallyd has (tallyd.c's list), and the checkers
# against themselves.
check-layers:
	$(Q)$(PYTHON) tests/check_layers.py
	$(Q)$(PYTHON) tests/check_layers.py --self-test
	$(Q)$(PYTHON) tests/check_threads.py
	$(Q)$(PYTHON) tests/check_threads.py --self-test

# The docs against the tree: links and anchors, the configuration page
# against config.h, the metrics table against the daemon, the README's
# length; and the checker against itself.
check-docs:
	$(Q)$(PYTHON) tests/check_docs.py
	$(Q)$(PYTHON) tests/check_docs.py --self-test

# docs/configuration.md's table, made from config.h's settings table.
docs-config:
	$(Q)$(PYTHON) tools/config_doc.py

# docs/errors.md's tables, made from status.h's statuses and tally.h's
# result codes.
docs-errors:
	$(Q)$(PYTHON) tools/errors_doc.py

test-units: $(BUILD)/bin/test_units
	$(Q)$(TEST_ENV) $< $(T)
test-grpc: $(BUILD)/bin/test_grpc
	$(Q)$(TEST_ENV) $< $(T)
test-core: $(BUILD)/bin/test_core
	$(Q)$(TEST_ENV) $< $(T)
test-sched: $(BUILD)/bin/test_sched
	$(Q)$(TEST_ENV) $< $(T)
test-api: $(BUILD)/bin/test_api
	$(Q)$(TEST_ENV) $< $(T)
test-seq: $(BUILD)/bin/test_seq
	$(Q)$(TEST_ENV) $< $(T)
# The simulation for SIM_SECONDS (a seed printed: TALLY_SIM_SEED=N
# build/bin/sim_seq --histories 1 replays a history); the soak runs it
# longer.
SIM_SECONDS ?= 10
test-store: $(BUILD)/bin/test_store
	$(Q)$(TEST_ENV) $< $(T)
test-sim: $(BUILD)/bin/sim_seq
	$(Q)$(TEST_ENV) $< --seconds $(SIM_SECONDS)
test-redis: $(BUILD)/bin/test_redis
	$(Q)$(TEST_ENV) $< $(T)
test-protocol: $(BUILD)/bin/test_protocol
	$(Q)$(TEST_ENV) $< $(T)
test-http: $(BUILD)/bin/test_http
	$(Q)$(TEST_ENV) $< $(T)
test-format: $(BUILD)/bin/test_format
	$(Q)$(TEST_ENV) $< $(T) $(FORMAT_CASES)
test-host: $(BUILD)/bin/test_host
	$(Q)$(TEST_ENV) $< $(T)
# The engine's cases, the longest suite, in ENGINE_SHARDS processes at
# once (TALLY_SHARD=k/n; 2, one a core), which take the cases from one
# queue as each finishes one (TALLY_SHARD_QUEUE: by index, every cl_gpu
# case fell to one process), each with its own copy of the
# kernel cache, whose new kernels go back into POCL_DIR when all are done;
# with T, one process. Each shard's output is printed whole, in order.
# ENGINE_CASES selects cases for every shard (check.h's patterns).
ENGINE_SHARDS ?= 2
ENGINE_CASES  ?=
# The engine's kernel-layout cases: the GPU layouts (work-group sizes,
# tile widths) and the tiny tiles, on PoCL's CPU device; every kernel
# forced onto them; the strided kernels on the tiny layouts. Each builds
# kernels that no other case and no daemon uses, and on an empty kernel
# cache they were 400 of the C suites' 470 s on two cores (BENCHMARKS.md,
# "`make test` on a fresh machine"). `make test` leaves them out; `make
# check`, `make test-kernels` and CI's ASan leg (`make test-asan`) run them.
ENGINE_LAYOUTS := cl_gpu _tiny forced_kernels strided_kernels
test-kernels: $(BUILD)/bin/test_engine
	$(Q)$(MAKE) --no-print-directory test-engine ENGINE_CASES="$(ENGINE_LAYOUTS)"
test-engine: $(BUILD)/bin/test_engine
	$(Q)if [ -n "$(T)" ] || [ "$(ENGINE_SHARDS)" -le 1 ]; then $(TEST_ENV) $< $(T); else \
	  d=$(abspath $(BUILD))/engine-shards; rm -rf $$d; mkdir -p $$d $(POCL_DIR); : > $$d/queue; \
	  for k in $$(seq 0 $$(($(ENGINE_SHARDS) - 1))); do \
	    cp -r $(POCL_DIR) $$d/pocl-$$k; \
	    ( $(TEST_ENV) POCL_CACHE_DIR=$$d/pocl-$$k TALLY_SHARD=$$k/$(ENGINE_SHARDS) TALLY_SHARD_QUEUE=$$d/queue \
	      $< $(ENGINE_CASES) > $$d/log-$$k 2>&1; echo $$? > $$d/rc-$$k ) & \
	  done; wait; rc=0; \
	  for k in $$(seq 0 $$(($(ENGINE_SHARDS) - 1))); do \
	    echo "test-engine: shard $$k of $(ENGINE_SHARDS)"; cat $$d/log-$$k; \
	    [ "$$(cat $$d/rc-$$k)" = 0 ] || rc=1; cp -rn $$d/pocl-$$k/. $(POCL_DIR)/; \
	  done; rm -rf $$d; exit $$rc; fi
test-accuracy: $(BUILD)/bin/test_accuracy
	$(Q)$(TEST_ENV) $< $(T)

# ThreadSanitizer, over what has threads to race:
# - every C suite (the engine's streams and pools, the scheduler's workers
#   and its queue, the server's modules), less the engine's cases on the
#   cl_gpu and *_tiny backends: those are kernel layouts (work-group sizes,
#   tile widths) inside OpenCL code that PoCL runs and TSan cannot see,
#   driven by the same host code as the cl_cpu cases, which run; less
#   forced_kernels (every kernel on tiny-tile layouts, through the OpenCL
#   layer, inside PoCL) and the one-thread strided tiles (host1, inline:
#   the same tile code that host3 runs on three threads, which runs);
#   less the codec's round_trip and number_lists (number text, one
#   thread: 26 s under TSan) and test_accuracy (the
#   64M-element error bounds: the same pool and stream code that
#   test_engine's host3 and cl cases run under TSan, a thousand times
#   longer, with no interleaving those lack): 130 s of the leg's 480;
# - the integration tests marked `concurrency` (conftest.py lists them, by
#   what they do): many clients at once, the queue, batching, deadlines,
#   cancellation and drain under load, gRPC streams and concurrent calls,
#   devices failing over while work runs, shared memory changed under a
#   running job, slow and abusive connections, the trace exporter's
#   thread, libtally's and the CLI's parallel requests and retries; less
#   those marked `peer` (see test-asan).
#   The rest (one request at a time: dtypes, formats, refusals, docs,
#   deploy files) runs the same code on one thread, and the plain and ASan
#   legs run it. As in test-asan, the daemons run the host backend unless
#   a test names a device or is marked `opencl` (3.3 s of CPU a start under
#   TSan with PoCL, 0.9 s without).
# Every report is written under build-thread/tsan/ and counted: one fails
# it, and the reports are printed even when a test failed first (a daemon
# that found a race exits 66). CI runs it.
TSAN_DIR := $(abspath $(BUILD))/tsan
test-tsan: $(if $(SANITIZE),,deps-venv)
ifneq ($(SANITIZE),thread)
	$(Q)$(MAKE) --no-print-directory SANITIZE=thread test-tsan
else
	$(Q)$(MAKE) --no-print-directory $(TEST_PROGRAMS)
	$(Q)rm -rf $(TSAN_DIR) && mkdir -p $(TSAN_DIR)
	$(Q)rc=0; export TSAN_OPTIONS="log_path=$(TSAN_DIR)/report second_deadlock_stack=1"; \
	  $(MAKE) --no-print-directory test-c C_TESTS="$(filter-out test-accuracy,$(C_TESTS))" \
	    ENGINE_CASES="-cl_gpu -_tiny -forced_kernels -strided_tiles_host1 -strided_tiles_inline" \
	    FORMAT_CASES="-round_trip -number_lists" || rc=1; \
	  $(MAKE) --no-print-directory test-integration TEST_DEVICE=host \
	    PYTEST_SELECT='-m "concurrency and not peer" $(NO_BROWSER)' || rc=1; \
	  n=$$(ls $(TSAN_DIR) | wc -l); if [ "$$n" -gt 0 ]; then \
	  cat $(TSAN_DIR)/*; echo "test-tsan: $$n ThreadSanitizer reports"; exit 1; fi; \
	  [ $$rc = 0 ] || exit 1; \
	  echo "test-tsan: C suites and concurrent integration tests, 0 ThreadSanitizer reports"
endif

# The daemon against the outside world (pytest, numpy, tritonclient), in
# PYTEST_JOBS processes (pytest-xdist; 4 by default: most tests wait on
# sockets, so more workers than cores keep both busy). No two tests share
# a port (each daemon binds port 0 and reports it), a PoCL cache (each
# daemon copies the one test-engine warmed) or a temporary file. T picks
# tests by name; PYTEST_SELECT adds pytest options (the legs above use it).
PYTEST_JOBS ?= 4
NO_BROWSER  := --ignore=tests/integration/test_browser.py
# TEST_DEVICE: the device of a test's tallyd when the test names none
# (conftest.py; empty: tallyd's default)
TEST_DEVICE ?=
test-integration: $(TALLYD) $(CLIENT_ALL) $(BUILD)/bin/test_client $(BUILD)/bin/model_fake docs-assets
	$(Q)TALLYD=$(abspath $(TALLYD)) POCL_CACHE_SEED=$(POCL_DIR) \
	  TALLY_CLI=$(abspath $(TALLY_CLI)) TALLY_TEST_CLIENT=$(abspath $(BUILD)/bin/test_client) \
	  TALLY_EXAMPLE=$(abspath $(EXAMPLE)) TALLY_TEST_DEVICE=$(TEST_DEVICE) $(ASAN_ENV) \
	  TALLY_SCREENSHOTS=$(abspath $(BUILD))/screenshots \
	  LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0 \
	  $(PYTHON) -m pytest -q -p no:cacheprovider --durations=15 $(if $(filter-out 0 1,$(PYTEST_JOBS)),-n $(PYTEST_JOBS) --dist loadgroup) \
	    $(PYTEST_SELECT) tests/integration $(if $(T),-k "$(T)")

# The Python packages the tests import, with a clear word when one is
# missing (`make check` installs nothing).
check-python:
	$(Q)$(PYTHON) tests/need_python.py

# The image, built with podman (installed when missing) as tally:VERSION.
image:
	$(Q)bash deploy/podman.sh build tally:$(VERSION)

# The Dockerfile built and run with podman (installed when missing); the
# sanitizer build has nothing to add to it.
# `make run` on a bare Debian 12 (a minbase root filesystem with make
# alone), in a podman container, and the README's first request.
test-bare:
	$(Q)bash tests/bare/run.sh

# TALLY_IMAGE_TESTS=0 (as `make test` sets it, after its test-c): the image's
# build stage leaves out the unit and codec tests.
TALLY_IMAGE_TESTS ?= 1
test-container: deps-venv $(TALLY_CLI)
ifeq ($(SANITIZE),)
	$(Q)TALLY_CLI=$(abspath $(TALLY_CLI)) TALLY_IMAGE_TESTS=$(TALLY_IMAGE_TESTS) \
	  bash tests/container/run.sh
else
	@echo "test-container: skipped with SANITIZE (the image is built without it)"
endif

# wrk against a fresh tallyd, next to nginx's ceiling (BENCHMARKS.md).
load: deps-bench $(TALLYD)
	$(Q)TALLYD=$(abspath $(TALLYD)) bash tests/load/run.sh

# A long mixed load at high concurrency: no slow request, no socket error
# (SOAK_SECONDS, default 600).
# The model checker's setups for MODEL_SECONDS each (tests/model/driver.py),
# two at a time (each waits on its daemons and their faults more than it
# computes; the integration suite runs them beside other tests too): every
# answer under faults against the reference model, a new seed each run
# (printed; TALLY_MODEL_SEED replays one). Each setup's output is printed
# whole, in order.
MODEL_SECONDS ?= 60
MODEL_SETUPS  := fake memory "state-dir --fsync always" "state-dir --fsync everysec" redis failover
soak: deps-bench $(TALLYD) $(BUILD)/bin/model_fake $(BUILD)/bin/sim_seq
	$(Q)TALLYD=$(abspath $(TALLYD)) bash tests/load/soak.sh
	$(Q)$(BUILD)/bin/sim_seq --seconds $(MODEL_SECONDS)
	$(Q)d=$(abspath $(BUILD))/model-soak; rm -rf $$d; mkdir -p $$d; \
	  printf '%s\n' $(MODEL_SETUPS) | TALLYD=$(abspath $(TALLYD)) \
	  TALLY_MODEL_FAKE=$(abspath $(BUILD)/bin/model_fake) xargs -P 2 -I{} sh -c \
	    'log="$$0/$$(echo "{}" | tr -c "a-z0-9\n" _).log"; \
	     $(PYTHON) tests/model/driver.py --setup {} --seconds $(MODEL_SECONDS) >"$$log" 2>&1 \
	     || echo "{}" >>"$$0/failed"' $$d; \
	  for f in $$d/*.log; do echo "== $$f"; cat "$$f"; done; \
	  if [ -e $$d/failed ]; then echo "soak: the model checker failed on: $$(cat $$d/failed | tr '\n' ';')"; exit 1; fi

# What splitting a tensor across requests and servers costs (BENCHMARKS.md).
bench-client: deps-bench $(TALLYD) $(TALLY_CLI)
	$(Q)TALLYD=$(abspath $(TALLYD)) TALLY_CLI=$(abspath $(TALLY_CLI)) bash tests/bench/bench_client.sh

bench-sched: $(BUILD)/bin/bench_sched
	$(Q)$< $(BENCH_ARGS)

bench-numbers: $(BUILD)/bin/bench_numbers
	$(Q)$< $(BENCH_ARGS)

bench-json: deps-bench $(TALLYD)
	$(Q)$(PYTHON) tests/bench/bench_json.py $(BENCH_ARGS)

# The service under load, binary and JSON, with and without batching
# (BENCHMARKS.md); fetches perf_analyzer into build/ on first use.
bench-serve: deps-bench $(TALLYD) $(TALLY_CLI) $(BENCH_BIN) $(BUILD)/bin/fsync_latency $(BUILD)/bin/hop_latency \
    $(BUILD)/bin/store_floor $(BUILD)/bin/grpc_floor $(BUILD)/bin/mhd_floor
	$(Q)$(PYTHON) tests/bench/bench_serve.py $(BENCH_ARGS)

# How soon a new tallyd answers with a cold kernel cache: start to the
# first 200, to a first answer, and to every device in the pool; with
# BENCH_ARGS=--load, a load across the change-over checked against numpy
# (BENCHMARKS.md, "Start-up: a cold kernel cache").
bench-start: deps-bench $(TALLYD)
	$(Q)$(PYTHON) tests/bench/bench_start.py $(BENCH_ARGS)

# Does a large gzip gRPC message on the loop thread delay REST's
# deadlines? (BENCHMARKS.md, "The loop thread and the deadlines")
bench-loop: deps-bench $(TALLYD)
	$(Q)$(PYTHON) tests/bench/bench_loop.py $(BENCH_ARGS)

# docs/performance.md, measured anew: the engine, the accuracy, where a
# request's time goes and the service through each door
# (tests/bench/bench_report.py, about 12 minutes here), then its tables
# and pictures (tools/perf_page.py). BENCH_ARGS="--only service" remakes
# one part.
bench-report: deps-bench $(TALLYD) $(TALLY_CLI) $(BENCH_BIN)
	$(Q)$(PYTHON) tests/bench/bench_report.py $(BENCH_ARGS)
	$(Q)$(PYTHON) tools/perf_page.py

# tally beside MLServer, KServe's ModelServer and FastAPI, each in a
# virtual environment of its own under build/peers/ (tests/bench/peers/),
# answers checked against numpy first; then the page's peer table and
# picture.
bench-peers: deps-bench $(TALLYD) $(TALLY_CLI)
	$(Q)$(PYTHON) tests/bench/bench_peers.py $(BENCH_ARGS)
	$(Q)$(PYTHON) tools/perf_page.py

# tally on a whole node in one run (tests/bench/bench_node.py): the engine's
# cases on the device, the engine beside a copy and the host backend, the
# service with --device host, the device alone and the default pool, and
# its scaling with threads; one JSON file, build/bench-node.json. On a
# node without the project's packages (a lent GPU machine), carry build/bin's
# NODE_PROGRAMS and build/node from `make bench-node-bundle` and run
# `python3 tests/bench/bench_node.py` there. BENCH_ARGS=--tiny is make
# check's quick run.
NODE_PROGRAMS := $(TALLYD) $(BUILD)/bin/test_engine $(BUILD)/bin/test_accuracy $(BENCH_BIN)
bench-node: deps-bench $(NODE_PROGRAMS) docs-assets
	$(Q)$(PYTHON) tests/bench/bench_node.py $(BENCH_ARGS)
bench-node-bundle: deps-bench $(NODE_PROGRAMS)
	$(Q)sh tools/node_bundle.sh build/node $(NODE_PROGRAMS)
# the quick run, on a copy of the C suites' kernel cache (test-c warmed it)
bench-node-tiny: $(NODE_PROGRAMS) docs-assets
	$(Q)$(PYTHON) tests/bench/bench_node.py --tiny \
	  --out $(BUILD)/bench-node-tiny.json

bench-engine: deps-bench $(BENCH_BIN)
	$(Q)POCL_CACHE_DIR=$(abspath $(BUILD))/pocl-bench $(BENCH_BIN) --numpy tests/bench/numpy_cumsum.py $(BENCH_ARGS)

# what the machine allows for a transposing scan, apart from tally: 2 MiB
# and 4 KiB pages, non-temporal and plain stores (x86-64 with AVX-512F)
$(BUILD)/bin/probe_transpose: tests/bench/probe_transpose.c
	@mkdir -p $(@D)
	$(Q)$(CC) -std=c11 $(WARN) -O3 -march=native -mavx512f -fopenmp -o $@ $<
# (the host backend's strided fast path is AVX-512F's; a CPU without it
# has nothing of this kind to measure)
bench-transpose: $(BUILD)/bin/probe_transpose
	$(Q)if ! $< --has-avx512f; then \
	  echo "bench-transpose: this CPU has no AVX-512F, which the host backend's strided path and this probe need: nothing to measure here"; \
	else for args in "2048 256 1" "4 256 1" "2048 1024 1" "2048 256 0"; do \
	  $< $$args || exit 1; done; fi

# what the machine allows for bench-engine's 1M rows, apart from tally:
# lines of 128 and columns in the cache, float64 and float-float carries
# (x86-64 with AVX2)
$(BUILD)/bin/probe_lines: tests/bench/probe_lines.c
	@mkdir -p $(@D)
	$(Q)$(CC) -std=c11 $(WARN) -O3 -march=native -fopenmp -o $@ $< -lm
bench-lines: $(BUILD)/bin/probe_lines
	$(Q)$<

# What building and running tallyd needs (`make run` installs it), and
# Swagger UI's files out of Debian's python3-flasgger.
deps:
	$(Q)sh deploy/install-deps.sh
	$(Q)sh tools/swagger_ui.sh fetch $(SWAGGER_DIR)

# And what the tests and benchmarks import, in the virtual environment
# (the tests' and benchmarks' targets that need it install it).
deps-bench: deps
	$(Q)sh deploy/install-deps.sh --test --bench --venv $(VENV)

# The tests' packages alone (no browser): what the legs that run the
# integration suite without the browser need (test-asan, test-tsan,
# test-container), so that each works on its own after `make run`.
deps-venv: deps
	$(Q)sh deploy/install-deps.sh --test --venv $(VENV)

# And the browser tests' chromium, chromium-driver and selenium.
deps-test: deps
	$(Q)sh deploy/install-deps.sh --test --browser --venv $(VENV)

# Settings come from the environment (TALLY_LISTEN, TALLY_WORKERS, ...,
# every one tallyd --help lists), from LISTEN=host:port, or from ARGS;
# --listen is passed only when LISTEN is given, so TALLY_LISTEN holds.
RUN_ADDR   = $(if $(findstring --listen,$(ARGS)),the address in ARGS,$(or $(LISTEN),$(TALLY_LISTEN),127.0.0.1:8080))
RUN_SCHEME = $(if $(or $(filter --tls-cert%,$(ARGS)),$(TALLY_TLS_CERT)),https,http)
RUN_GRPC   = $(if $(findstring --grpc-listen,$(ARGS)),gRPC on the address in ARGS,$(if $(filter undefined,$(origin TALLY_GRPC_LISTEN)),gRPC on 127.0.0.1:8001,$(if $(TALLY_GRPC_LISTEN),gRPC on $(TALLY_GRPC_LISTEN),gRPC off)))
run: deps
	$(Q)$(MAKE) --no-print-directory $(TALLYD) $(TALLY_CLI) docs-assets
	@echo "run: tallyd is $(abspath $(TALLYD))"
	@echo "run: the CLI is $(abspath $(TALLY_CLI)) (export PATH=$(abspath $(dir $(TALLY_CLI))):\$$PATH)"
	@echo "run: starting tallyd on $(RUN_SCHEME)://$(RUN_ADDR), $(RUN_GRPC) (Ctrl-C stops it; the first"
	@echo "run: start builds the kernels in the background, about a minute, cached afterwards)"
	$(Q)exec $(TALLYD) $(if $(LISTEN),--listen $(LISTEN)) $(ARGS)

format:
	$(Q)clang-format -i common/*.[ch] server/*.[ch] server/*/*.[ch] client/*/*.[ch] tests/*.[ch] tests/*/*.[ch]

clean:
	rm -rf build build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
.SECONDARY:
