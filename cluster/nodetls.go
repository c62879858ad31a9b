package cluster

import "github.com/limitnode/limitnode/internal/transport"

// NodeTLS makes a node's Raft port speak mutual TLS: every connection, in
// both directions (Raft, forwarded requests, membership), presents this
// node's certificate and verifies the peer's against the CA that signs every
// member's; plaintext and certificates of another CA are refused. A dialing
// node also checks that the certificate names the address it dialed (an IP
// address or a DNS name in the certificate's subject alternative names).
//
// A node certificate is a member's full credential: whoever holds one that
// the CA signed can take part in Raft (vote, lead, replicate any entry) and
// forward requests. Issue them to the cluster's nodes only.
type NodeTLS = transport.TLS
