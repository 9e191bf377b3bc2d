package eventstore

import "net/netip"

// addr is an optional address: NULL when absent.
func addr(a netip.Addr) any {
	if !a.IsValid() {
		return nil
	}
	return a
}

// port is an optional port: NULL when 0, which no sensor reports for a
// real flow.
func port(p uint32) any {
	if p == 0 {
		return nil
	}
	return int32(p)
}
