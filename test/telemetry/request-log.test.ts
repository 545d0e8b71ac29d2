import pino from 'pino'
import t from 'tap'
import { baseLoggerOptions } from '../../src/telemetry/logger.js'
import { deferredChildLogger } from '../../src/telemetry/request-log.js'
import { captureLog } from '../helper.js'

t.test('a request\'s logger is made when it first logs, and then logs as a pino child would', async (t) => {
  const log = captureLog()
  const parent = pino({ ...baseLoggerOptions({ logLevel: 'info' }), base: undefined, timestamp: false }, log.stream)
  let made = 0
  const counting = Object.assign(Object.create(parent), { child: (...args: Parameters<typeof parent.child>) => { made++; return parent.child(...args) } })
  const deferred = deferredChildLogger(counting, { reqId: 'r-1' }, {})
  t.equal(deferred.level, 'info', 'the level is the parent\'s')
  deferred.debug({ password: 'Leak12345' }, 'below the level')
  t.equal(made, 1, 'any line but reading the level makes the child')
  deferred.info({ password: 'Leak12345', user: { password: 'Leak12345' } }, 'a line')
  deferred.warn('a message alone')
  deferred.child({ part: 'x' }).error('from a child of it')
  t.equal(made, 1, 'made once')
  t.strictSame(log.lines, [
    { level: 30, reqId: 'r-1', password: '[redacted]', user: { password: '[redacted]' }, msg: 'a line' },
    { level: 40, reqId: 'r-1', msg: 'a message alone' },
    { level: 50, reqId: 'r-1', part: 'x', msg: 'from a child of it' }
  ])
  const quiet = deferredChildLogger(counting, { reqId: 'r-2' }, { level: 'warn' }) as ReturnType<typeof deferredChildLogger> & { setBindings (bindings: object): void }
  t.equal(quiet.level, 'warn', 'a route\'s own level')
  quiet.setBindings({ trace_id: 't-2' })
  t.equal(made, 1, 'a request that logs nothing makes no child, bindings set or not')
  quiet.warn('with the bindings set before')
  quiet.setBindings({ span_id: 's-2' })
  quiet.error('and after')
  t.strictSame(log.lines.slice(3), [
    { level: 40, reqId: 'r-2', trace_id: 't-2', msg: 'with the bindings set before' },
    { level: 50, reqId: 'r-2', trace_id: 't-2', span_id: 's-2', msg: 'and after' }
  ])
})
