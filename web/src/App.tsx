import { lazy, Suspense } from 'react';
import { Link, Navigate, Route, Routes } from 'react-router';
import { RequireSession } from './components/Layout';
import { Loading } from './components/Status';
import { AccountScreen } from './screens/Account';
import { AuditScreen } from './screens/Audit';
import { BatchesScreen } from './screens/Batches';
import { LoginScreen } from './screens/Login';
import { OperatorsScreen } from './screens/Operators';
import { SensorDetailScreen } from './screens/SensorDetail';
import { prefetchSensors, SensorsScreen } from './screens/Sensors';
import type { ApiClient } from './api/client';
import { TenantDetailScreen } from './screens/TenantDetail';
import { TenantsScreen } from './screens/Tenants';
import { TokensScreen } from './screens/Tokens';

// The charting library is most of the bundle: only the Analytics screen loads it.
const AnalyticsScreen = lazy(() => import('./screens/Analytics').then((m) => ({ default: m.AnalyticsScreen })));

/**
 * Asks for the data of the screen the console opens on while the session is checked, so that it
 * does not wait for that round trip: the sensor list (the start page, and the fleet's largest).
 */
export function prefetchFor(api: ApiClient, location: { pathname: string; search: string }) {
  if (location.pathname === '/sensors' || location.pathname === '/') prefetchSensors(api, location.pathname === '/' ? '' : location.search);
}

export function AppRoutes() {
  return (
    <Routes>
      <Route path="/login" element={<LoginScreen />} />
      <Route element={<RequireSession />}>
        <Route index element={<Navigate to="/sensors" replace />} />
        <Route path="/sensors" element={<SensorsScreen />} />
        <Route path="/sensors/:sensorId" element={<SensorDetailScreen />} />
        <Route path="/batches" element={<BatchesScreen />} />
        <Route path="/tenants" element={<TenantsScreen />} />
        <Route path="/tenants/:tenantId" element={<TenantDetailScreen />} />
        <Route
          path="/analytics"
          element={
            <Suspense fallback={<Loading label="Loading analytics…" />}>
              <AnalyticsScreen />
            </Suspense>
          }
        />
        <Route path="/operators" element={<OperatorsScreen />} />
        <Route path="/tokens" element={<TokensScreen />} />
        <Route path="/audit" element={<AuditScreen />} />
        <Route path="/account" element={<AccountScreen />} />
        <Route path="*" element={<NotFound />} />
      </Route>
    </Routes>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        Nothing lives at this address. Go to <Link to="/sensors">Sensors</Link>.
      </p>
    </section>
  );
}
