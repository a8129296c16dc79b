export { Tenants, startTenants, tenantExchange } from './tenants.js';
export type { TenantState } from './tenants.js';
export { tenantsOptions, TENANT_MAX_CONNECTIONS } from './options.js';
export type { TenantsOptions, TenantRelayOptions, TenantConsumerOptions, ResolvedTenantsOptions } from './options.js';
