// Package cachestatus serves a cacheclient.Client's status page. It lives apart from
// cacheclient, as cacheprom does, so that a service embedding the cache links the page's
// templates and charts only when it mounts the page:
//
//	mux.Handle("/cache/status", cachestatus.Handler(client))
//
// The page is the one the distributor and the player serve for themselves (one layout, one
// rule for HTML or JSON): see Handler.
//
// One file, handler.go, holds it: Handler, the page's template and the sampling of
// cacheclient.Stats into the page's history.
package cachestatus
