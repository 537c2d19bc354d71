//go:build tools

// Package kube only names the commands this module exists to build, so that `go mod tidy`
// keeps k8s.io/kubernetes and everything they need in go.mod and go.sum. kubectl is built only
// on a machine that has none (../kube-tools.sh); the node's and the control plane's other
// commands only for the single-node cluster of the end-to-end tests (../cluster-tools.sh), and
// kubeadm only for a kind node image (../kind-tools.sh).
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
