/** converge-events/typeorm against the adapter contract (test/support/adapter-contract.ts). */
import { DataSource, EntitySchema } from 'typeorm';
import { executorFromTypeOrm, typeOrmFromExecutor } from '../../src/adapters/typeorm.js';
import { adapterContract } from '../support/adapter-contract.js';

interface Order {
  id: string;
  version: number;
}
interface OrderRow {
  eventId: string;
  aggregateId: string;
  amount: number;
}

adapterContract('typeorm', async ({ connectionString, schema }) => {
  const Orders = new EntitySchema<Order>({
    name: 'Order',
    tableName: 'orders',
    schema,
    columns: { id: { type: 'text', primary: true }, version: { type: 'integer' } },
  });
  const OrderRows = new EntitySchema<OrderRow>({
    name: 'OrderRow',
    tableName: 'order_rows',
    schema,
    columns: {
      eventId: { name: 'event_id', type: 'text', primary: true },
      aggregateId: { name: 'aggregate_id', type: 'text' },
      amount: { type: 'integer' },
    },
  });
  const dataSource = await new DataSource({
    type: 'postgres',
    url: connectionString,
    entities: [Orders, OrderRows],
    extra: { max: 2 },
  }).initialize();
  return {
    transaction: (work) =>
      dataSource.transaction(async (manager) => {
        const insertOrder = async (id: string, version: number) => {
          await manager.insert(Orders, { id, version });
        };
        await work({ insertOrder, executor: executorFromTypeOrm(manager) });
      }),
    async writeThroughView(tx, row) {
      // An InsertResult: one identifier per row written.
      return typeOrmFromExecutor(tx, dataSource).insert(OrderRows, row);
    },
    failThroughView: (tx) => typeOrmFromExecutor(tx, dataSource).query('SELECT 1 / 0'),
    // TypeORM's PostgresQueryRunner.commitTransaction does not look at the COMMIT's command tag.
    commitAnsweredByRollback: 'resolves',
    executorOutsideTransaction: () => executorFromTypeOrm(dataSource.manager),
    close: () => dataSource.destroy(),
  };
});
