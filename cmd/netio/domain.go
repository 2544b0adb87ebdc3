package main

import (
	"flag"

	"github.com/netio-go/netio"
)

// connFlags are the flags of every command that connects or listens: the
// key (-key-file, -insecure) and the NIC (-domain).
type connFlags struct {
	*keyFile
	domain string
}

// options are the netio options of the flags.
func (c *connFlags) options() []netio.Option {
	opts := c.keyFile.options()
	if c.domain != "" {
		opts = append(opts, netio.WithDomain(c.domain))
	}
	return opts
}

// connFlag adds -key-file, -insecure and -domain.
func connFlag(fs *flag.FlagSet) *connFlags {
	c := &connFlags{keyFile: keyFlag(fs)}
	fs.StringVar(&c.domain, "domain", "", "libfabric `domain` to use: a NIC (verbs: mlx5_1) or, for tcp and sockets, an interface (eth0); 'netio info' lists them (default: the first libfabric offers for the address)")
	return c
}
