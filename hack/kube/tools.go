//go:build tools

// Package kube only names the commands this module exists to build, so that `go mod tidy`
// keeps k8s.io/kubernetes and everything they need in go.mod and go.sum. kubectl is built only
// on a machine that has none (../kube-tools.sh).
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
