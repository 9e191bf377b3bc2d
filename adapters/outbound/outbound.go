// Package outbound holds what the adapters that call an HTTP service outside
// RXC (misp, openai) check and strip the same way: the configured base URL,
// and net/http's url.Error around a failed request.
package outbound

import (
	"errors"
	"net/url"
	"strings"
)

// BaseURL checks that raw is an http(s) URL with a host and without
// credentials, and returns it without trailing slashes (paths are appended
// to it). what names the setting in the error ("misp: URL").
func BaseURL(what, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", errors.New(what + " must be an http(s) URL without credentials")
	}
	return strings.TrimRight(raw, "/"), nil
}

// Cause drops url.Error's quoting of the whole request URL from err: the
// base URL is configuration the log may show, but nothing else (a query
// carrying an indicator, say) should ride along.
func Cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
