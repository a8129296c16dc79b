/** converge-events/mikro-orm (MikroORM 6, @mikro-orm/postgresql) against the adapter contract (test/support/adapter-contract.ts). */
import { EntitySchema, MikroORM } from '@mikro-orm/postgresql';
import { executorFromMikroOrm, mikroOrmFromExecutor } from '../../src/adapters/mikro-orm.js';
import { adapterContract } from '../support/adapter-contract.js';

class Order {
  constructor(
    public id: string,
    public version: number,
  ) {}
}
class OrderRow {
  constructor(
    public eventId: string,
    public aggregateId: string,
    public amount: number,
  ) {}
}

adapterContract('mikro-orm', async ({ connectionString, schema }) => {
  const orm = await MikroORM.init({
    clientUrl: connectionString,
    schema,
    pool: { min: 0, max: 2 },
    entities: [
      new EntitySchema<Order>({
        class: Order,
        tableName: 'orders',
        properties: { id: { type: 'string', primary: true }, version: { type: 'integer' } },
      }),
      new EntitySchema<OrderRow>({
        class: OrderRow,
        tableName: 'order_rows',
        properties: {
          eventId: { type: 'string', primary: true, fieldName: 'event_id' },
          aggregateId: { type: 'string', fieldName: 'aggregate_id' },
          amount: { type: 'integer' },
        },
      }),
    ],
  });
  return {
    transaction: (work) =>
      orm.em.fork().transactional(async (em) => {
        const insertOrder = async (id: string, version: number) => {
          em.persist(new Order(id, version));
          await em.flush();
        };
        await work({ insertOrder, executor: executorFromMikroOrm(em) });
      }),
    async writeThroughView(tx, row) {
      // The query builder's run result: affectedRows.
      return mikroOrmFromExecutor(tx, orm.em)
        .createQueryBuilder(OrderRow)
        .insert({ eventId: row.eventId, aggregateId: row.aggregateId, amount: row.amount })
        .execute('run');
    },
    failThroughView: (tx) => mikroOrmFromExecutor(tx, orm.em).execute('SELECT 1 / 0'),
    // MikroORM 6 commits through knex, which does not look at the COMMIT's command tag.
    commitAnsweredByRollback: 'resolves',
    executorOutsideTransaction: () => executorFromMikroOrm(orm.em.fork()),
    close: () => orm.close(true),
  };
});
