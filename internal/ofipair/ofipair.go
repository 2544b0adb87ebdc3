// Package ofipair connects two bare ofi endpoints over loopback without a
// reactor, by polling. The ofi tests use it, and so do the benchmarks that
// measure the bare libfabric baseline netio is compared against.
package ofipair

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/netio-go/netio/ofi"
)

// Side is one end of a connection with its own queues.
type Side struct {
	Domain   *ofi.Domain
	EQ       *ofi.EQ
	CQ       *ofi.CQ
	Endpoint *ofi.Endpoint
	Region   *ofi.Region
	Info     *ofi.Info // what the endpoint was opened with
}

// Pair is a connected client and server on one fabric.
type Pair struct {
	Fabric         *ofi.Fabric
	Server, Client Side
	Listener       *ofi.PassiveEndpoint
	ListenEQ       *ofi.EQ
	ServerAddr     netip.AddrPort
	ClientData     []byte // private data the server received with the request
	ServerData     []byte // private data the client received with FI_CONNECTED
	infos          []*ofi.InfoList
}

// Options of a Pair.
type Options struct {
	Provider   string        // "" means "tcp"
	RegionSize int           // bytes registered on each side; 0 means 1 MiB
	ServerRecv []ofi.Segment // receives the server posts before accepting
	ClientData []byte        // sent with the connection request
	ServerData []byte        // sent with the accept
	Timeout    time.Duration // 0 means 20 s (a guard against a hang, not a speed limit)
}

// New connects a pair on 127.0.0.1.
func New(o Options) (p *Pair, err error) {
	if o.Provider == "" {
		o.Provider = "tcp"
	}
	if o.RegionSize == 0 {
		o.RegionSize = 1 << 20
	}
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Second
	}
	p = &Pair{}
	made := p // p is nil once an error is returned
	defer func() {
		if err != nil {
			made.Close()
		}
	}()
	li, err := ofi.GetInfo(ofi.Hints{Provider: o.Provider, Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		return nil, err
	}
	p.infos = append(p.infos, li)
	info := li.Entries[0]
	if p.Fabric, err = ofi.OpenFabric(info); err != nil {
		return nil, err
	}
	if p.ListenEQ, err = p.Fabric.OpenEQ(64); err != nil {
		return nil, err
	}
	if p.Listener, err = p.Fabric.OpenPassiveEndpoint(info, 1); err != nil {
		return nil, err
	}
	if err = p.Listener.Bind(p.ListenEQ); err != nil {
		return nil, err
	}
	if err = p.Listener.Listen(); err != nil {
		return nil, err
	}
	if p.ServerAddr, err = p.Listener.Addr(); err != nil {
		return nil, err
	}
	ci, err := ofi.GetInfo(ofi.Hints{Provider: o.Provider, Node: p.ServerAddr.Addr().String(), Service: strconv.Itoa(int(p.ServerAddr.Port()))})
	if err != nil {
		return nil, err
	}
	p.infos = append(p.infos, ci)
	if err = p.Client.open(p.Fabric, ci.Entries[0], o.RegionSize, 2); err != nil {
		return nil, err
	}
	if err = p.Client.Endpoint.Connect(ci.Entries[0], o.ClientData); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Timeout)
	var ev ofi.Event
	// The server side sees the request only once the client has read its EQ
	// (progress is manual), so both queues are polled in turn.
	for p.Server.Endpoint == nil {
		if time.Now().After(deadline) {
			return nil, errors.New("ofipair: no connection request")
		}
		if _, err := p.Client.EQ.Read(&ev); err != nil {
			return nil, err
		} else if ev.Kind == ofi.EventError {
			return nil, ev.Err
		}
		ok, err := p.ListenEQ.Read(&ev)
		if err != nil {
			return nil, err
		}
		if !ok || ev.Kind != ofi.EventConnReq {
			continue
		}
		p.ClientData = append([]byte(nil), ev.PrivateData()...)
		req := ev.Info
		if err = p.Server.open(p.Fabric, req, o.RegionSize, 3); err != nil {
			p.Listener.Reject(req, nil)
			return nil, err
		}
		if _, err = p.Server.Endpoint.PostRecv(p.Server.Region, o.ServerRecv); err != nil {
			req.Free()
			return nil, err
		}
		err = p.Server.Endpoint.Accept(o.ServerData)
		req.Free()
		if err != nil {
			return nil, err
		}
	}
	up := 0
	for up != 3 {
		if time.Now().After(deadline) {
			return nil, errors.New("ofipair: not connected in time")
		}
		for i, q := range []*ofi.EQ{p.Client.EQ, p.Server.EQ} {
			ok, err := q.Read(&ev)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			switch ev.Kind {
			case ofi.EventConnected:
				up |= 1 << i
				if i == 0 {
					p.ServerData = append([]byte(nil), ev.PrivateData()...)
				}
			case ofi.EventError:
				return nil, ev.Err
			default:
				return nil, fmt.Errorf("ofipair: unexpected %v", ev.Kind)
			}
		}
	}
	return p, nil
}

func (s *Side) open(f *ofi.Fabric, info *ofi.Info, regionSize int, token uint64) (err error) {
	s.Info = info
	if s.Domain, err = f.OpenDomain(info); err != nil {
		return err
	}
	if s.EQ, err = f.OpenEQ(64); err != nil {
		return err
	}
	if s.CQ, err = s.Domain.OpenCQ(1024); err != nil {
		return err
	}
	if s.Region, err = s.Domain.NewRegion(regionSize); err != nil {
		return err
	}
	if s.Endpoint, err = s.Domain.OpenEndpoint(info, token); err != nil {
		return err
	}
	if err = s.Endpoint.BindEQ(s.EQ); err != nil {
		return err
	}
	if err = s.Endpoint.BindCQ(s.CQ); err != nil {
		return err
	}
	return s.Endpoint.Enable()
}

// Poll reads completions from s's CQ into buf until it has at least want
// entries or the timeout passes. Error entries are returned as errors.
func (s *Side) Poll(buf []ofi.Completion, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	n := 0
	for n < want {
		k, err := s.CQ.Read(buf[n:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, rerr := s.CQ.ReadError(&ce); ok {
				return n, &ce
			} else if rerr != nil {
				return n, rerr
			}
			return n, err
		}
		n += k
		if k == 0 && time.Now().After(deadline) {
			return n, fmt.Errorf("ofipair: %d of %d completions after %v", n, want, timeout)
		}
	}
	return n, nil
}

func (s *Side) close() {
	if s.Endpoint != nil {
		s.Endpoint.Close()
	}
	if s.CQ != nil {
		var buf [16]ofi.Completion
		for i := 0; i < 100; i++ {
			if n, _ := s.CQ.Read(buf[:]); n == 0 {
				break
			}
		}
		s.CQ.Close()
	}
	if s.Region != nil {
		s.Region.Close()
	}
	if s.EQ != nil {
		s.EQ.Close()
	}
	if s.Domain != nil {
		s.Domain.Close()
	}
}

// Close tears everything down in the order libfabric needs.
func (p *Pair) Close() {
	p.Client.close()
	p.Server.close()
	if p.Listener != nil {
		p.Listener.Close()
	}
	if p.ListenEQ != nil {
		p.ListenEQ.Close()
	}
	if p.Fabric != nil {
		p.Fabric.Close()
	}
	for _, l := range p.infos {
		l.Free()
	}
}
