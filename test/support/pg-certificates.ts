import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** What a server needs for TLS: PEM paths of its certificate and of its private key. */
export interface ServerCertificates { cert: string, key: string }

export interface TestCertificates extends ServerCertificates {
  /** The CA that signed `cert`: what a client trusts to verify the server. */
  ca: string
  /** A CA that signed nothing here: a client trusting only it must refuse the server. */
  otherCa: string
  /** `ca`'s private key: what signs a client's certificate too (createClientCertificate). */
  caKey: string
}

// EC P-256 rather than RSA: a key takes milliseconds instead of a noticeable pause per test.
const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

async function selfSignedCa (dir: string, name: string): Promise<{ cert: string, key: string }> {
  const [cert, key] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)]
  // Stated explicitly rather than left to the distribution's openssl.cnf: Node (OpenSSL)
  // only accepts an issuer that says it is a CA.
  await run('openssl', ['req', '-x509', ...newKey, '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
  return { cert, key }
}

/**
 * In `dir`: a CA, a server certificate it signed for `hosts` (IP addresses and DNS names, e.g.
 * ['127.0.0.1', 'localhost']), that certificate's key, and an unrelated CA for "unknown CA" tests.
 */
export async function createCertificates (dir: string, hosts: string[]): Promise<TestCertificates> {
  const [ca, other] = await Promise.all([selfSignedCa(dir, 'test-ca'), selfSignedCa(dir, 'other-ca')])
  const [csr, cert, key, ext] = ['server.csr', 'server.crt', 'server.key', 'server.ext'].map((file) => join(dir, file))
  // Clients check the address they dialled against the subjectAltName, never the CN.
  const names = hosts.map((host) => (isIP(host) ? `IP:${host}` : `DNS:${host}`)).join(',')
  writeFileSync(ext, `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${names}\n`)
  await run('openssl', ['req', '-new', ...newKey, '-keyout', key, '-out', csr, '-subj', `/CN=${hosts[0] ?? 'localhost'}`])
  // A random serial: a fixed one would make two runs' certificates look like the same one.
  const serial = `0x${Date.now().toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`
  await run('openssl', ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', serial, '-days', '2', '-extfile', ext, '-out', cert])
  return { ca: ca.cert, cert, key, otherCa: other.cert, caKey: ca.key }
}

/** In `dir`: a client certificate for the database role `user` (its CN), signed by `certificates`' CA. */
export async function createClientCertificate (dir: string, certificates: TestCertificates, user: string): Promise<ServerCertificates> {
  const [csr, cert, key, ext] = ['client.csr', 'client.crt', 'client.key', 'client.ext'].map((file) => join(dir, file))
  writeFileSync(ext, 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n')
  await run('openssl', ['req', '-new', ...newKey, '-keyout', key, '-out', csr, '-subj', `/CN=${user}`])
  const serial = `0x${Date.now().toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`
  await run('openssl', ['x509', '-req', '-in', csr, '-CA', certificates.ca, '-CAkey', certificates.caKey, '-set_serial', serial, '-days', '2', '-extfile', ext, '-out', cert])
  return { cert, key }
}
