// Package clustersecret turns one shared cluster secret into what secures
// a cluster without a CA to run: the gossip encryption keys (AES-256) and
// an Ed25519 peer identity, its self-signed certificate and the TLS
// configurations of the peer port that admit only the holders of the
// secret.
//
// The file (see Parse) holds one secret per line, standard base64 of 32
// to 64 random bytes, as `openssl rand -base64 32` prints one. The first
// is the primary: this node presents its peer identity and encrypts gossip
// with its key. Every secret listed is accepted: a peer presenting the
// identity of any of them is admitted, and gossip encrypted with any of
// their keys is decrypted. That is how a secret is rotated without a
// restart (the file is watched and re-read; see Source):
//
//  1. on every node, add the new secret as the second line;
//  2. once every node has it, make it the first line (the old one second);
//  3. once every node has that, remove the old line.
//
// Each step is safe while some nodes have it and others not: every node
// always accepts what every other node presents.
//
// Derivation: HKDF-SHA256 (crypto/hkdf) of the secret, salt
// "sluice cluster secret v1", with a distinct info label per use:
// "gossip aes-256 key" for the 32-byte gossip key and "peer ed25519 seed"
// for the seed of the Ed25519 key. The peer port speaks TLS 1.3 with that
// key's certificate on both sides; each side accepts the other only if
// its certificate's public key is one derived from an accepted secret,
// and TLS proves the other side holds its private key. So peer calls are
// encrypted, both ends are authenticated, and nothing an eavesdropper
// records can be replayed.
//
// It imports nothing of Sluice but internal/watch and internal/keyfile,
// which reads the file.
package clustersecret
