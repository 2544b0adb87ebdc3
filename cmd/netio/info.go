package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

const infoUsage = `usage: netio info [flags]

Lists the libfabric providers on this machine that netio can use (reliable
connected endpoints with send and receive), one line per provider and
interface, with what netio's tests say about each: tcp is tested, sockets
in part, verbs is what netio is written for but is not tested here (tcp
under netio's verbs profile stands in for it), the others are untested.
Also lists each provider's domains (what -domain names), the providers
left out because they busy-poll, and the provider netio picks when none
is named.
`

// infoResult is what netio info prints; -json prints it as it is.
type infoResult struct {
	// Libfabric is the version of the libfabric library loaded; API is the
	// one netio was built against.
	Libfabric string `json:"libfabric_version"`
	API       string `json:"api_version"`
	// Profile is the ofi profile in force ($NETIO_PROFILE: "verbs"), or
	// empty: under it the limits below are those the profile enforces.
	Profile string `json:"profile,omitempty"`
	// Default is the provider netio uses when none is named.
	Default defaultProvider `json:"default"`
	// Endpoints are the usable providers, one entry per fabric and domain
	// (for tcp: per subnet and interface).
	Endpoints []endpointInfo `json:"endpoints"`
	// Domains are the usable providers' domains (NICs, or interfaces for
	// tcp), what -domain and netio.WithDomain name.
	Domains []providerDomains `json:"domains"`
	// Unusable are providers present but left out.
	Unusable []unusableProvider `json:"unusable,omitempty"`
	// Support says, for each provider listed, how far netio has been
	// tested on it.
	Support []providerSupport `json:"support"`
}

// providerSupport is what netio's testing says about a provider.
type providerSupport struct {
	Provider string `json:"provider"`
	// Present says the provider is on this machine (verbs is listed
	// either way).
	Present bool `json:"present"`
	// Status is "tested", "untested" or "broken".
	Status string `json:"status"`
	Note   string `json:"note"`
}

// supportOf is what netio's testing says about the providers it knows;
// any other is untested.
var supportOf = map[string]providerSupport{
	"tcp": {Status: "tested", Note: "netio's tests and benchmarks run on it (libfabric 1.17)"},
	"verbs": {Status: "untested", Note: "the provider netio is written for (InfiniBand, RoCE: registered memory, " +
		"credit-based flow control), not tested here: no RDMA device on the test machines"},
	"sockets": {Status: "tested", Note: "in part: netio's tests of net.Conn conformance, HighThroughput mode and " +
		"publish/subscribe and netio demo run on it (libfabric 1.17); the rest run on tcp only"},
}

// support returns what netio's testing says about provider.
func support(provider string) providerSupport {
	name, _, _ := strings.Cut(provider, ";")
	s, ok := supportOf[name]
	if !ok {
		s = providerSupport{Status: "untested", Note: "netio has not been tested on it"}
	}
	s.Provider = provider
	return s
}

// warnProvider warns on stderr about a provider netio is known to fail on.
func warnProvider(stderr io.Writer, provider string) {
	if provider == "" {
		provider = os.Getenv("NETIO_PROVIDER")
	}
	if s := support(provider); provider != "" && s.Status == "broken" {
		fmt.Fprintf(stderr, "netio: warning: provider %s is %s\n", provider, s.Note)
	}
}

type defaultProvider struct {
	// Provider is what netio.Listen and netio.Dial use for network "".
	Provider string `json:"provider"`
	// From says where that comes from: $NETIO_PROVIDER or
	// netio.DefaultNetwork.
	From string `json:"from"`
	// Available says whether this machine offers it.
	Available bool `json:"available"`
}

type endpointInfo struct {
	Provider   string `json:"provider"`
	Version    string `json:"version"`
	Fabric     string `json:"fabric"`
	Domain     string `json:"domain"`
	Address    string `json:"address,omitempty"`
	MRMode     uint64 `json:"mr_mode"`
	TxSize     int    `json:"tx_size"`
	RxSize     int    `json:"rx_size"`
	InjectSize int    `json:"inject_size"`
	MaxMsgSize uint64 `json:"max_msg_size"`
}

type providerDomains struct {
	Provider string   `json:"provider"`
	Domains  []string `json:"domains"`
}

type unusableProvider struct {
	Provider string `json:"provider"`
	Reason   string `json:"reason"`
}

// probed are providers asked about one by one, to find those GetInfo
// drops because their version busy-polls (asking for all of them at once
// drops them silently).
var probed = []string{"tcp", "net", "sockets", "verbs", "efa", "psm2", "psm3", "opx", "cxi", "ucx", "usnic", "shm", "udp"}

func infoMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("info", infoUsage, stderr)
	provider := fs.String("provider", "", "show only this provider (empty: every provider)")
	asJSON := fs.Bool("json", false, "print as JSON instead of a table")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	res, err := runInfo(*provider)
	if err != nil {
		return failed(stderr, "info", err)
	}
	if *asJSON {
		if err := printJSON(stdout, res); err != nil {
			return failed(stderr, "info", err)
		}
		return exitOK
	}
	printInfo(stdout, res)
	return exitOK
}

func runInfo(provider string) (*infoResult, error) {
	res := &infoResult{
		Libfabric: ofi.LibraryVersion().String(),
		API:       ofi.APIVersion.String(),
		Default:   defaultProvider{Provider: netio.DefaultNetwork, From: "netio.DefaultNetwork"},
	}
	if p := os.Getenv("NETIO_PROVIDER"); p != "" {
		res.Default = defaultProvider{Provider: p, From: "$NETIO_PROVIDER"}
	}
	prof, err := ofi.ActiveProfile()
	if err != nil {
		return nil, err
	}
	res.Profile = prof
	// Every interface, not only loopback: the addresses are what -listen
	// can bind.
	eps, err := endpoints(provider)
	if err != nil && (provider != "" || !errors.Is(err, ofi.ENODATA)) {
		if provider != "" {
			return nil, fmt.Errorf("provider %q: %w", provider, err)
		}
		return nil, err
	}
	res.Endpoints = eps
	res.Domains = domainsOf(eps)
	if provider == "" {
		found := map[string]bool{}
		for _, e := range eps {
			found[e.Provider] = true
		}
		for _, p := range probed {
			if found[p] {
				continue
			}
			if _, err := endpoints(p); errors.Is(err, ofi.ErrSpinningProvider) {
				res.Unusable = append(res.Unusable, unusableProvider{Provider: p, Reason: err.Error()})
			}
		}
	}
	seen := map[string]bool{}
	for _, e := range eps {
		if !seen[e.Provider] {
			seen[e.Provider] = true
			s := support(e.Provider)
			s.Present = true
			res.Support = append(res.Support, s)
		}
	}
	if !seen["verbs"] && (provider == "" || provider == "verbs") {
		res.Support = append(res.Support, support("verbs"))
	}
	if provider == "" || provider == res.Default.Provider {
		for _, e := range eps {
			res.Default.Available = res.Default.Available || e.Provider == res.Default.Provider
		}
	} else if _, err := endpoints(res.Default.Provider); err == nil {
		res.Default.Available = true
	}
	return res, nil
}

// domainsOf lists the domains of each provider of eps, in their order.
func domainsOf(eps []endpointInfo) []providerDomains {
	var out []providerDomains
	for _, e := range eps {
		i := slices.IndexFunc(out, func(p providerDomains) bool { return p.Provider == e.Provider })
		if i < 0 {
			out = append(out, providerDomains{Provider: e.Provider})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].Domains, e.Domain) {
			out[i].Domains = append(out[i].Domains, e.Domain)
		}
	}
	return out
}

// endpoints asks libfabric for the MSG endpoints of provider ("" for all).
func endpoints(provider string) ([]endpointInfo, error) {
	l, err := ofi.GetInfo(ofi.Hints{Provider: provider})
	if err != nil {
		return nil, err
	}
	defer l.Free()
	var out []endpointInfo
	for _, i := range l.Entries {
		e := endpointInfo{
			Provider:   i.Provider(),
			Version:    i.ProviderVersion().String(),
			Fabric:     i.FabricName(),
			Domain:     i.DomainName(),
			MRMode:     i.MRMode(),
			TxSize:     i.TxSize(),
			RxSize:     i.RxSize(),
			InjectSize: i.InjectSize(),
			MaxMsgSize: i.MaxMsgSize(),
		}
		if a, ok := i.SourceAddr(); ok {
			e.Address = a.Addr().String()
		}
		out = append(out, e)
	}
	return out, nil
}

func printInfo(w io.Writer, r *infoResult) {
	fmt.Fprintf(w, "libfabric %s (netio built against API %s)\n", r.Libfabric, r.API)
	avail := "available"
	if !r.Default.Available {
		avail = "NOT available here: netio.Listen and netio.Dial with network \"\" will fail"
	}
	fmt.Fprintf(w, "netio picks %s (%s), %s\n", r.Default.Provider, r.Default.From, avail)
	if r.Profile != "" {
		fmt.Fprintf(w, "%s profile in force ($%s): the limits below are those it enforces\n", r.Profile, ofi.ProfileEnv)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "provider\tnetio\tversion\tfabric\tdomain\taddress\tmr_mode\ttx/rx queue\tinject\tmax message")
	for _, e := range r.Endpoints {
		maxMsg := bytesString(int64(min(e.MaxMsgSize, 1<<62)))
		if e.MaxMsgSize >= 1<<62 {
			maxMsg = "unlimited"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", e.Provider, support(e.Provider).Status, e.Version, e.Fabric, e.Domain, e.Address,
			mrModeString(e.MRMode), e.TxSize, e.RxSize, bytesString(int64(e.InjectSize)), maxMsg)
	}
	tw.Flush()
	if len(r.Domains) > 0 {
		fmt.Fprintln(w, "\ndomains (-domain, netio.WithDomain):")
		for _, d := range r.Domains {
			fmt.Fprintf(w, "  %s: %s\n", d.Provider, strings.Join(d.Domains, ", "))
		}
	}
	if len(r.Support) > 0 {
		fmt.Fprintln(w, "\nnetio on these providers:")
		for _, s := range r.Support {
			mark := ""
			if s.Status == "broken" {
				mark = "WARNING: "
			}
			name := s.Provider
			if !s.Present {
				name += " (not on this machine)"
			}
			fmt.Fprintf(w, "  %s: %s%s: %s\n", name, mark, s.Status, s.Note)
		}
	}
	if len(r.Unusable) > 0 {
		fmt.Fprintln(w, "\nleft out:")
		for _, u := range r.Unusable {
			fmt.Fprintf(w, "  %s: %s\n", u.Provider, strings.TrimPrefix(u.Reason, "ofi: "))
		}
	}
}

// mrModeString names the memory registration bits netio knows about.
func mrModeString(m uint64) string {
	if m == 0 {
		return "none"
	}
	return fmt.Sprintf("%#x", m)
}
