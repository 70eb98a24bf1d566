//go:build !amd64

package containerd

const isAMD64 = false
