/** The write-back's Lua (src/limits/write-back.ts): each runs in Redis as one step. */

// The Redis this instance writes to has an epoch: a random value set once, without expiry, in a
// key of its own. The same epoch means Redis kept its keys since this instance last wrote (a
// network blip, a pause, a fail-over to a replica); another one means it lost them (a restart of
// a Redis that keeps nothing on disk, a flush).
// The epoch is written back even when it is there: a Redis that refuses writes (out of memory
// under noeviction) fails this step, and counting does not come back to it only to fall back again.
export const EPOCH = `
local epoch = redis.call('GET', KEYS[1]) or ARGV[1]
redis.call('SET', KEYS[1], epoch)
return epoch
`
// KEYS: the epoch, this batch's marker, then each counter. ARGV: the epoch the batch was built
// for, the marker's life, then for each counter the failures to add, the ms they have left, the
// count at which that counter locks (-1: a share of a Redis that lost its keys), and 1 when a
// success here cleared it first. A batch built for an epoch Redis no longer has is not
// applied (-1); one already applied is not applied twice (0): a batch whose answer timed out may
// have run, so it is sent again as it was, under its marker. A counter Redis did not have gets
// this instance's time left; one that reaches its lock keeps at least the lock's time here. A
// counter rebuilt from the instances' shares ends with the earliest of them: Redis's own window
// began with its first failure, no later than any instance's, and a mirrored lock carries it.
export const WRITE_BACK = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 0 end
for i = 3, #KEYS do
  local j = 4 * i - 9
  local add, left, max = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  if ARGV[j + 3] == '1' then redis.call('DEL', KEYS[i]) end
  if add > 0 then
    local count = redis.call('INCRBY', KEYS[i], add)
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 or (max < 0 and left < ttl) or (max >= 0 and count >= max and ttl < left) then redis.call('PEXPIRE', KEYS[i], left) end
  end
end
return #KEYS - 2
`
