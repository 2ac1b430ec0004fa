//go:build tools

// etcd's main package is the root of go.etcd.io/etcd/server/v3; imported here only so
// that `go mod tidy` keeps every module it needs in go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
