import { openMigratedPglite } from './src/db/snapshot.js'
const c=()=>{const u=process.cpuUsage();return (u.user+u.system)/1000}
for (let i=0;i<4;i++){ const t=c(); const w=performance.now(); const { database } = await openMigratedPglite(); console.log('open', (c()-t).toFixed(0), (performance.now()-w).toFixed(0)); await database.close() }
const { database } = await openMigratedPglite()
const { sql } = await import('drizzle-orm')
for (let i=0;i<4;i++){ const t=c(); await database.db.execute(sql.raw('truncate users, familiar_addresses restart identity')); console.log('truncate', (c()-t).toFixed(0)) }
