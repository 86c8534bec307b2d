/**
 * Who is signed in: the user and role from /auth/me, kept for the app's life. A viewer sees
 * every page read-only (`canEdit`); an admin also sees the admin pages.
 */
import { type ComponentChildren, createContext } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { api, onSignedOut, setToken, token } from "./api/client.ts";

export type Role = "viewer" | "editor" | "admin";

export interface User {
  id: string;
  username: string;
  role: Role;
  email: string | null;
}

export interface Session {
  user: User | null;
  /** The stored token is being checked. */
  loading: boolean;
  canEdit: boolean;
  isAdmin: boolean;
  signIn(username: string, password: string): Promise<void>;
  signOut(): void;
}

const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside SessionProvider");
  return session;
}

export function SessionProvider({ children }: { children: ComponentChildren }) {
  const [user, setUser] = useState<User | null>(null);
  const [loading, setLoading] = useState(token() !== null);

  useEffect(() => {
    const off = onSignedOut(() => setUser(null));
    if (token() !== null) {
      api<User>("GET", "/auth/me")
        .then(setUser)
        .catch(() => setToken(null))
        .finally(() => setLoading(false));
    }
    return off;
  }, []);

  const session: Session = {
    user,
    loading,
    canEdit: user?.role === "editor" || user?.role === "admin",
    isAdmin: user?.role === "admin",
    async signIn(username, password) {
      const answer = await api<{ access_token: string }>("POST", "/auth/login", {
        body: { username, password },
      });
      setToken(answer.access_token);
      setUser(await api<User>("GET", "/auth/me"));
    },
    signOut() {
      setToken(null);
      setUser(null);
    },
  };
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}
