//go:build tools

// Package kube only names the command this module exists to build, so that `go mod tidy`
// keeps k8s.io/kubernetes and everything kube-apiserver needs in go.mod and go.sum.
package kube

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
