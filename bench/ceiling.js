// The ceiling for GET /users/me: a bare node:http server that reads the request body and
// answers the same JSON from memory, with no framework, token or database. Whatever the
// service reaches is compared with what this process reaches on the same core, same load.
// Usage: node bench/ceiling.js <port> '<json body>'
import http from 'node:http'

const port = Number(process.argv[2] ?? 18090)
const body = Buffer.from(process.argv[3] ?? JSON.stringify({ id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER' }))
const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(body.length) }

const server = http.createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    res.writeHead(200, headers)
    res.end(body)
  })
})
server.keepAliveTimeout = 65_000
server.listen(port, '127.0.0.1', () => process.stdout.write(`listening ${port}\n`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
