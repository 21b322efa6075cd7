/** The bench's user database: every user's password is `right-<name>`. */
export async function checkPassword(username: string, password: string): Promise<boolean> {
  return password === `right-${username}`;
}
