import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import { AppRoutes, prefetchFor } from './App';
import { SessionProvider } from './auth/session';
import { readConfig } from './config';
import './styles.css';

const root = createRoot(document.getElementById('root')!);
const cfg = readConfig();

if (!cfg.ok) {
  root.render(
    <main className="login">
      <div className="card login-card banner-error" role="alert">
        <h1>The console is not configured</h1>
        <p>{cfg.error}</p>
      </div>
    </main>,
  );
} else {
  root.render(
    <StrictMode>
      <BrowserRouter>
        <SessionProvider config={cfg.config} onStart={(api) => prefetchFor(api, window.location)}>
          <AppRoutes />
        </SessionProvider>
      </BrowserRouter>
    </StrictMode>,
  );
}
