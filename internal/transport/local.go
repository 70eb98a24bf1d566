package transport

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
)

// localCreds are the transport credentials of Local security: the link is
// a unix socket (its file mode keeps other users out), and the server
// learns the peer's uid from the kernel to check it again per call.
type localCreds struct{}

// localInfo is the AuthInfo of a unix-socket peer.
type localInfo struct {
	credentials.CommonAuthInfo
	uid uint32
}

func (localInfo) AuthType() string { return "local" }

func (localCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if _, ok := conn.(*net.UnixConn); !ok {
		return nil, nil, fmt.Errorf("local security dials unix sockets only, not %s", conn.RemoteAddr())
	}
	return conn, localInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (localCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, nil, fmt.Errorf("local security serves unix sockets only, not %s", conn.RemoteAddr())
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, nil, err
	}
	if credErr != nil {
		return nil, nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return conn, localInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, uid: cred.Uid}, nil
}

func (localCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "local"}
}

func (localCreds) Clone() credentials.TransportCredentials { return localCreds{} }

func (localCreds) OverrideServerName(string) error {
	return errors.New("local security has no server name")
}
