/**
 * The dashboard: an invitation's set-password screen at its link; sign-in until a user is
 * signed in, then the pages under one layout (the account, its role, the theme, sign-out). Every
 * page reads the same /api/v1 a script uses.
 */
import { useState } from "preact/hooks";
import { LocationProvider, Route, Router, useLocation } from "preact-iso";
import { Project } from "./pages/project.tsx";
import { Projects } from "./pages/projects.tsx";
import { Providers } from "./pages/providers.tsx";
import { SignIn } from "./pages/sign-in.tsx";
import { SetPassword } from "./pages/set-password.tsx";
import { System } from "./pages/system.tsx";
import { Tokens } from "./pages/tokens.tsx";
import { Users } from "./pages/users.tsx";
import { Audit } from "./pages/audit.tsx";
import { Alerts } from "./pages/alerts.tsx";
import { WireguardSettings } from "./pages/wireguard-settings.tsx";
import { OpenvpnSettings } from "./pages/openvpn-settings.tsx";
import { SessionProvider, useSession } from "./session.tsx";
import { applyTheme, currentTheme, setTheme, type Theme } from "./theme.ts";

applyTheme(currentTheme());

export function App() {
  return (
    <SessionProvider>
      <LocationProvider>
        <Shell />
      </LocationProvider>
    </SessionProvider>
  );
}

function Shell() {
  const session = useSession();
  const { path } = useLocation();
  // An invitation's link: its screen, whoever is signed in (or nobody).
  if (path === "/set-password") return <SetPassword />;
  if (session.loading) return <p class="muted">Loading…</p>;
  if (!session.user) return <SignIn />;
  return (
    <div class="layout">
      <TopBar />
      <main class="content">
        <Router>
          <Route path="/" component={Projects} />
          <Route path="/projects/:id" component={Project} />
          <Route path="/projects/:id/:tab" component={Project} />
          <Route path="/projects/:id/:tab/:item" component={Project} />
          <Route path="/providers" component={Providers} />
          <Route path="/system" component={System} />
          <Route path="/users" component={Users} />
          <Route path="/audit" component={Audit} />
          <Route path="/alerts" component={Alerts} />
          <Route path="/wireguard" component={WireguardSettings} />
          <Route path="/openvpn" component={OpenvpnSettings} />
          <Route path="/tokens" component={Tokens} />
          <Route default component={NotFound} />
        </Router>
      </main>
    </div>
  );
}

function TopBar() {
  const session = useSession();
  const [theme, setThemeState] = useState<Theme>(currentTheme());
  const toggle = () => {
    const next = theme === "dark" ? "light" : "dark";
    setTheme(next);
    setThemeState(next);
  };
  return (
    <header class="top-bar">
      <a href="/" class="brand">Octoprox</a>
      <nav aria-label="Main">
        <a href="/">Projects</a>
        <a href="/providers">Providers</a>
        {session.isAdmin ? <a href="/system">System</a> : null}
        {session.isAdmin ? <a href="/users">Users</a> : null}
        {session.isAdmin ? <a href="/audit">Audit</a> : null}
        {session.isAdmin ? <a href="/alerts">Alerts</a> : null}
        {session.isAdmin ? <a href="/wireguard">WireGuard</a> : null}
        {session.isAdmin ? <a href="/openvpn">OpenVPN</a> : null}
        <a href="/tokens">API tokens</a>
      </nav>
      <div class="account">
        <span class="user">{session.user?.username}</span>
        <span class="badge" data-role={session.user?.role}>{session.user?.role}</span>
        <button
          type="button"
          class="secondary"
          onClick={toggle}
          aria-label="Theme"
          title="Light or dark"
        >
          {theme === "dark" ? "Light theme" : "Dark theme"}
        </button>
        <button type="button" class="secondary" onClick={() => session.signOut()}>
          Sign out
        </button>
      </div>
    </header>
  );
}

function NotFound() {
  return (
    <section>
      <h2>Not found</h2>
      <p>
        No page here. <a href="/">Back to the projects</a>.
      </p>
    </section>
  );
}
