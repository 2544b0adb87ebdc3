# Everyday tasks. `make test` is what CI runs (.ci/run).

# Go from the official tarball lives in /usr/local/go/bin, which a fresh
# non-login shell may not have on PATH.
ifeq ($(shell command -v go 2>/dev/null),)
ifneq ($(wildcard /usr/local/go/bin/go),)
export PATH := /usr/local/go/bin:$(PATH)
endif
endif

# apt-get needs root; use sudo only when we are not root and it exists.
SUDO := $(shell [ "$$(id -u)" -ne 0 ] && command -v sudo)

.PHONY: deps demo test test-sockets test-portable test-hosts bench compare fuzz soak

# netio's cgo binding needs libfabric's headers; fi_info (libfabric-bin)
# shows which providers this machine has.
deps:
	@command -v go >/dev/null || { echo "go not found: install Go or put it on PATH" >&2; exit 1; }
	@dpkg -s libfabric-dev libfabric-bin >/dev/null 2>&1 || { \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libfabric-dev libfabric-bin; }

demo: deps
	go run ./cmd/netio demo

# make test is what README gives a new user and what CI runs: the suite;
# alongside it (the suite mostly waits, so the two share the cores) the
# root package again under the verbs profile (ofi/profile.go: tcp made to
# fail where verbs would), with the locked-memory limit raised where it
# may be, since the profile checks it as verbs pins; then the multi-host tests, which skip with a
# message where network namespaces cannot be made (not root, no iproute2).
# The point-to-point tests and the core of publish/subscribe (both modes, gaps, drop
# policies, Block, slow subscribers cut loose, Shutdown, keys, limits; subscriber
# children across processes) run again on the reliable-datagram providers (links on RDM
# endpoints), about 30 s each.
RDM_TESTS := ^(TestNetConn|TestHTTP|TestEcho|TestLargeMessage.*|TestBuffered(ManyMessages|FullPages|LargeMessages|NextMessageHolds|FlushAndIdle|CloseSendsPage)|TestPublishSubscribe|TestPublishLargeMessages|TestSubscribeNotAPublisher|TestSubscriptionsShareAConnection|TestSubscriptionGrowsAndCloses|TestPublishCancelledContext|TestPublishPartial|TestPublisherEventsAndEnd|TestPublisherCloseUnblocksPublish|TestPublisherDeliveredKeepsLeftSubscribers|TestPubSubDropPolicies|TestPubSubStuckSubscriberHoldsOnlyItsTag|TestPubSubSlowSubscriberCutLoose|TestPublisherShutdownSlowReader|TestKeyPubSub|TestPublisherMaxConns|TestMaxTags)$$
# On shm: subscriber processes stopped (heartbeats; drops while stopped), killed, and 300
# subscriptions from another process coming and going.
SHM_TESTS := ^(TestHeartbeatStoppedSubscriber|TestPubSubSubscriberKilled|TestPubSubSubscriberChurnShm|TestPubSubStoppedSubscriberDrops)$$
SOCKETS_TESTS := ^(TestNetConn|TestHTTP|TestEcho|TestLargeMessage.*|TestBuffered(ManyMessages|FullPages|LargeMessages|NextMessageHolds|FlushAndIdle|CloseSendsPage)|TestPublishSubscribe|TestPublishLargeMessages|TestSubscriptionsShareAConnection|TestPublisherDeliveredKeepsLeftSubscribers)$$

test: deps
	go vet ./...
	@verbs=$$(mktemp); \
	(ulimit -l unlimited 2>/dev/null; NETIO_PROFILE=verbs go test -race -count=1 -timeout 15m . >$$verbs 2>&1) & pid=$$!; \
	echo "go test -race -count=1 -timeout 15m ./..."; \
	go test -race -count=1 -timeout 15m ./...; plain=$$?; \
	wait $$pid; profiled=$$?; \
	echo "NETIO_PROFILE=verbs go test -race -count=1 -timeout 15m ."; cat $$verbs; rm -f $$verbs; \
	[ $$plain -eq 0 ] && [ $$profiled -eq 0 ]
	go test -count=1 -run 'Allocs$$' .
	NETIO_TEST_PROVIDER=shm go test -race -count=1 -timeout 5m -run '$(RDM_TESTS)' .
	NETIO_TEST_PROVIDER=shm go test -race -count=1 -timeout 5m -run '$(SHM_TESTS)' .
	NETIO_TEST_PROVIDER='tcp;ofi_rxm' go test -race -count=1 -timeout 5m -run '$(RDM_TESTS)' .
	$(MAKE) --no-print-directory test-portable
	$(MAKE) --no-print-directory test-hosts

# The tests that hold on every provider, on the sockets provider. Not part of make test: the
# provider opens each connection's data socket on the first send and, under load, fails that
# send with fi_send ENOENT (docs/fabrics.md), in about one run of eight.
test-sockets: deps
	NETIO_TEST_PROVIDER=sockets go test -race -count=1 -timeout 10m -run '$(SOCKETS_TESTS)' .

# Without cgo, or for another system, netio compiles and its entry points
# fail with an error naming what is missing (unsupported_test.go).
test-portable:
	CGO_ENABLED=0 go build ./...
	CGO_ENABLED=0 go test -count=1 -run '^TestUnsupported$$' .
	GOOS=darwin go vet ./...

# The multi-host tests (hosts/, build tag hosts): processes in network
# namespaces joined by veth pairs, links cut and impaired. They need root
# and iproute2 (and tc netem or iptables for the impaired link), and skip
# with a message where namespaces cannot be made.
# The multi-host tests need ip (iproute2) and, where the kernel has no
# netem, iptables to drop packets; installed when missing and we may, and
# skipped by the tests with a message when they are still missing.
test-hosts: deps
	@if ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then \
		if [ "$$(id -u)" -eq 0 ] || [ -n "$(SUDO)" ]; then \
			$(SUDO) apt-get update -qq && \
			$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 iptables; \
		fi || echo "test-hosts: could not install iproute2/iptables; the tests that need them skip"; \
	fi
	go vet -tags hosts ./hosts/
	go test -tags hosts -race -count=1 -timeout 10m -v ./hosts/

bench: deps
	go test -run '^$$' -bench . -benchmem -count 5 .

# Every fuzz target of the module, FUZZTIME each, one after another: go
# test fuzzes one target of one package at a time. Targets are found by
# grep in the test files of the module's packages (not benchmarks/, a
# module of its own), so new ones are picked up. A crasher stops the run
# and is saved under the package's testdata/fuzz/<Target>/, where plain
# go test then runs it. FUZZFLAGS=-parallel=1 keeps to one worker.
FUZZTIME ?= 30s
FUZZFLAGS ?=

fuzz: deps
	@set -e; for pkg in $$(go list ./...); do \
		dir=$$(go list -f '{{.Dir}}' $$pkg); \
		for name in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); do \
			echo "go test -run '^\$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg"; \
			go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg; \
		done; \
	done

# Side-by-side comparison with ZeroMQ, Go's net.TCPConn and bare libfabric,
# each sender and receiver in its own process (benchmarks/, a nested module
# that the library never imports): writes benchmarks/results/compare.md and
# compare.svg. About 6 minutes plus 1.5 for the publish/subscribe rows and
# 3.5 for the fan-out rows;
# `cd benchmarks && go run ./cmd/compare -quick`
# takes about three.
compare: deps
	@dpkg -s libzmq3-dev pkg-config >/dev/null 2>&1 || { \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libzmq3-dev pkg-config; }
	cd benchmarks && go run ./cmd/compare

# The soak (soak_test.go, build tag soak): SOAKTIME of mixed LowLatency,
# HighThroughput and publish/subscribe traffic under the race detector,
# with subscribers joining, leaving and killed; fails on a lost message
# under Block, an uncounted drop, resident memory growing over 10% after
# the warm-up, or a leaked goroutine or descriptor. Prints its figures.
SOAKTIME ?= 10m

soak: deps
	NETIO_SOAK=$(SOAKTIME) go test -race -tags soak -count=1 -run '^TestSoak$$' -timeout 40m -v .
